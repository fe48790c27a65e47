"""Quality floors of the default settings on the shared sets (the figures reached, less a small margin).

One setting serves both corpora: the runbooks summaries and the kubevirt summaries run with the same
defaults. `lookup` must also stay at or above every other configuration on each set."""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.evals.evaluation import CONFIGS, run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.store import indexing
from retrieval.store.support_fit import ensure_fit

from ..conftest import KUBEVIRT, KUBEVIRT_EVAL, RUNBOOKS_EVAL, SHARED, needs_shared

pytestmark = pytest.mark.slow  # each test reads a whole corpus's eval sets through a real Weaviate

MARGIN = 0.02


def _services(corpus, store, embedder, settings):
    """The lookup's services as a user's ingest leaves them: reading the knowledge base's own support baselines."""
    services = LookupServices(L0Index(corpus.entries), embedder, store)
    norms, _ = ensure_fit(store, corpus, services, settings)
    return replace(services, norms=norms)


def _run(corpus, store, embedder, settings, path, collection):
    eval_set = load_eval_set(path, known_ids=[e.entry_id for e in corpus.entries])
    settings = settings.with_(collection=collection)
    report = run_eval(eval_set, _services(corpus, store, embedder, settings), settings)
    assert report.calibration["lookup"]["fit"]["baselines"]["kind"] == "self"
    return report


@pytest.fixture(scope="module")
def runbooks_report(runbooks_corpus, runbooks_store, embedder, base_settings):
    return _run(runbooks_corpus, runbooks_store, embedder, base_settings, RUNBOOKS_EVAL, "TestRunbooks")


@pytest.fixture(scope="module")
def kubevirt_store(weaviate_client, embedder):
    from retrieval.store.weaviate_store import KnowledgeStore

    needs_shared(KUBEVIRT, KUBEVIRT_EVAL)
    corpus = load_corpus(KUBEVIRT)
    store = KnowledgeStore(weaviate_client, "TestKubevirt")
    store.drop()
    indexing.ingest(store, corpus, embedder)
    return corpus, store


@pytest.fixture(scope="module")
def kubevirt_report(kubevirt_store, embedder, base_settings):
    corpus, store = kubevirt_store
    return _run(corpus, store, embedder, base_settings, KUBEVIRT_EVAL, "TestKubevirt")


def _no_configuration_above_lookup(report, tolerance_cases=0):
    """No configuration's mrr@10 above lookup's (by more than `tolerance_cases` cases' worth)."""
    best = report.metrics["lookup"]["mrr@10"]
    slack = tolerance_cases / report.settings["answerable"] + 1e-9
    above = {c: m["mrr@10"] for c, m in report.metrics.items() if m["mrr@10"] > best + slack}
    assert not above, f"configurations above lookup's mrr@10 {best:.3f}: {above}"


def _support_promise(report, ratio, gap):
    """Right answers that get the support claim, as a share of hit@1: the claim is not withheld from most of them; and
    the mean estimate (the predicted hit@1) within `gap` of the measured hit@1."""
    routing, hit1 = report.routing["lookup"], report.metrics["lookup"]["hit@1"]
    assert routing["correct_supported_rate"] >= ratio * hit1, (routing["correct_supported_rate"], hit1)
    assert routing["support_auc"] is not None and routing["support_auc"] >= 0.70
    calibration = report.calibration["lookup"]
    assert abs(calibration["predicted_hit1"] - hit1) <= gap, calibration


# Figures of the defaults (bge-small-en-v1.5, vector 2.5, lexical 1, name 2, 15 candidates per list, a BM25F score
# missing from a full list counted at its last) on the shared sets, measured with the eval CLI (docs/quality.md):
# mrr@10, hit@1, correct_supported / hit@1, predicted hit@1 - hit@1. Floors are these less a margin.
def test_runbooks_summaries_floors(runbooks_report):
    m = runbooks_report.metrics["lookup"]
    print("runbooks lookup", m)
    assert set(runbooks_report.metrics) == set(CONFIGS)
    assert m["mrr@10"] >= 0.968 - MARGIN and m["hit@1"] >= 0.939 - MARGIN and m["recall@5"] >= 0.99 - MARGIN
    _no_configuration_above_lookup(runbooks_report)
    routing = runbooks_report.routing["lookup"]
    assert routing["routing_accuracy"] >= 0.94 and routing["filter_excluded_rate"] <= 0.06
    _support_promise(runbooks_report, 0.914 - 0.05, 0.08 + 0.04)


def test_kubevirt_summaries_floors_with_the_same_settings(kubevirt_report):
    m = kubevirt_report.metrics["lookup"]
    print("kubevirt lookup", m)
    assert m["mrr@10"] >= 0.925 - MARGIN and m["recall@5"] >= 0.99 - MARGIN
    # Weaviate's hybrid (unfiltered) is less than one case above lookup here (0.930 against 0.925)
    _no_configuration_above_lookup(kubevirt_report, tolerance_cases=1)
    routing = kubevirt_report.routing["lookup"]
    assert routing["routing_accuracy"] >= 0.94 and routing["filter_excluded_rate"] <= 0.06
    _support_promise(kubevirt_report, 0.938 - 0.08, 0.02 + 0.04)


@pytest.mark.parametrize(
    "name, mrr, hit1, ratio, gap",
    [("kubevirt-alert-descriptions", 0.948, 0.897, 0.962, 0.04), ("kubevirt-issue-titles", 0.777, 0.707, 0.780, 0.07)],
)
def test_kubevirt_descriptions_and_issue_titles_floors(name, mrr, hit1, ratio, gap, kubevirt_store, embedder, base_settings):
    path = SHARED / "eval_sets" / f"{name}.yaml"
    needs_shared(path)
    corpus, store = kubevirt_store
    report = _run(corpus, store, embedder, base_settings, path, "TestKubevirt")
    m = report.metrics["lookup"]
    print(name, "lookup", m, report.routing["lookup"])
    assert m["mrr@10"] >= mrr - MARGIN and m["hit@1"] >= hit1 - MARGIN * 2
    _no_configuration_above_lookup(report)
    routing = report.routing["lookup"]
    assert routing["routing_accuracy"] >= 0.94 and routing["filter_excluded_rate"] <= 0.06
    _support_promise(report, ratio - 0.08, gap + 0.04)


@pytest.mark.parametrize(
    "name, floor",
    [
        ("runbooks-alert-summaries-unanswerable", 0.88 - 0.08),  # 25 cases: one case is 0.04; 0.76 before the baselines
        ("kubevirt-alert-descriptions-unanswerable", 0.97 - 0.07),  # long descriptions: 0.45 with the old BM25F rule
        ("kubevirt-issue-titles-unanswerable", 1.0 - 0.14),
    ],
)
def test_unanswerable_queries_go_without_a_support_claim(name, floor, request, embedder, base_settings):
    path = SHARED / "eval_sets" / f"{name}.yaml"
    needs_shared(path)
    if name.startswith("runbooks"):
        corpus, store = request.getfixturevalue("runbooks_corpus"), request.getfixturevalue("runbooks_store")
        collection = "TestRunbooks"
    else:
        corpus, store = request.getfixturevalue("kubevirt_store")
        collection = "TestKubevirt"
    report = _run(corpus, store, embedder, base_settings, path, collection)
    rate = report.routing["lookup"]["unanswerable_unsupported_rate"]
    print(name, "lookup unsupported", rate)
    assert rate >= floor


def _as_notifications(path, corpus):
    """The set's queries as an alert notification writes them: '[FIRING:1] <alert name> <summary>', the alert
    name being the file name of the runbook the case expects (which is how runbook_url names it)."""
    eval_set = load_eval_set(path, known_ids=[e.entry_id for e in corpus.entries])
    names = {e.entry_id: e.name for e in corpus.entries}
    cases = tuple(replace(c, query=f"[FIRING:1] {names[next(iter(c.expected))]} {c.query}") for c in eval_set.cases if c.expected)
    return replace(eval_set, name=f"{eval_set.name}-notifications", cases=cases)


@pytest.mark.parametrize("corpus_name", ["runbooks", "kubevirt"])
def test_a_query_that_names_its_alert_finds_that_runbook_first(
    corpus_name, request, runbooks_corpus, runbooks_store, embedder, base_settings
):
    """With the alert's name in the query L0 alone is nearly always right; the lookup must not lose that
    (with name_weight 0 it scored 0.962 and 0.957 mrr@10, below l0_only's 0.987 and 0.959)."""
    if corpus_name == "runbooks":
        corpus, store, path, collection = runbooks_corpus, runbooks_store, RUNBOOKS_EVAL, "TestRunbooks"
    else:
        corpus, store = request.getfixturevalue("kubevirt_store")
        path, collection = KUBEVIRT_EVAL, "TestKubevirt"
    eval_set = _as_notifications(path, corpus)
    settings = base_settings.with_(collection=collection)
    report = run_eval(eval_set, _services(corpus, store, embedder, settings), settings)
    m = report.metrics["lookup"]
    print(corpus_name, "notifications, lookup", m, "l0_only", report.metrics["l0_only"])
    assert m["mrr@10"] >= 0.98 - MARGIN and m["hit@1"] >= 0.97 - MARGIN
    _no_configuration_above_lookup(report, tolerance_cases=1)  # bge alone finds one more kubevirt alert first
    # the query names the runbook it found first: that answer never reads as "the corpus may not answer this"
    named_first = [c for c in report.to_dict()["cases"] if c["configs"]["lookup"]["rank"] == 1]
    assert named_first and all(c["configs"]["lookup"]["semantic_support"] for c in named_first)


def test_eval_the_tool_and_the_sweep_rank_every_case_of_a_shared_set_alike(
    runbooks_report, runbooks_corpus, runbooks_store, embedder, base_settings
):
    """The one runner: `lookup` in eval, lookup_knowledge called directly, and the sweep's re-ranking of the
    candidates it fetched give the same ranking and support claim for every case of the runbooks summaries."""
    from retrieval.core.lookup import lookup_knowledge, search_text
    from retrieval.lab.sweep import case_figures
    from retrieval.lab.sweep_signals import collect_signals, query_keys

    settings = base_settings.with_(collection="TestRunbooks", top_k=10)  # as run_eval runs the lookup
    eval_set = load_eval_set(RUNBOOKS_EVAL, known_ids=[e.entry_id for e in runbooks_corpus.entries])
    services = _services(runbooks_corpus, runbooks_store, embedder, settings)
    in_eval = {c.id: c.configs["lookup"] for c in runbooks_report.cases}
    signals = {s.case_id: s for s in collect_signals(eval_set, services, settings, query_keys(settings))}
    assert len(in_eval) == len(eval_set.cases) == len(signals) > 0
    for case in eval_set.cases:
        direct = lookup_knowledge(search_text(case.query), services, settings.options())
        assert tuple(r.entry_id for r in direct.results) == in_eval[case.id].ranking, case.id
        assert direct.relevance.semantic_support == in_eval[case.id].semantic_support, case.id
        rr, _, _, supported, _ = case_figures(signals[case.id], settings)
        assert rr == pytest.approx(in_eval[case.id].rr), case.id
        assert supported == in_eval[case.id].semantic_support, case.id
