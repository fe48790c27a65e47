"""The judging queue on real traffic: the shared eval sets of both corpora looked up through the real lookup and
recorded, then "least sure first" holds more wrong top results among its first 20 than random picks do."""

from __future__ import annotations

from dataclasses import replace
from statistics import mean

import pytest

from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.evals.sets import load_eval_set
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.store.support_fit import ensure_fit
from retrieval.traffic.queue import LEAST_SURE, NEAREST, RANDOM, build_queue

from ..conftest import KUBEVIRT, KUBEVIRT_EVAL, RUNBOOKS, RUNBOOKS_EVAL, SHARED, needs_shared

pytestmark = pytest.mark.slow  # every case of four eval sets through a real Weaviate

FIRST = 20
SEEDS = range(10)
KUBEVIRT_SETS = (KUBEVIRT_EVAL, *(SHARED / "eval_sets" / f"kubevirt-{s}.yaml" for s in ("alert-descriptions", "issue-titles")))


def record_sets(corpus, knowledge, embedder, settings, recorder, paths) -> dict[str, set[str]]:
    """Look up every case of the sets at `paths` as recorded traffic (one session tag per set): {invocation id: expected}."""
    services = LookupServices(L0Index(corpus.entries), embedder, knowledge)
    norms, _ = ensure_fit(knowledge, corpus, services, settings)  # as a user's ingest leaves the knowledge base
    services = replace(services, norms=norms, recorder=recorder)
    expected = {}
    for path in paths:
        eval_set = load_eval_set(path, known_ids=[e.entry_id for e in corpus.entries])
        options = settings.with_(session_tag=path.stem).options()
        for case in eval_set.cases:
            expected[lookup_knowledge(case.query, services, options).invocation_id] = set(case.expected)
    return expected


@pytest.fixture(scope="module")
def traffic(tmp_path_factory, weaviate_client, embedder, base_settings, runbooks_corpus, runbooks_store):
    from retrieval.store.weaviate_store import KnowledgeStore

    needs_shared(RUNBOOKS, RUNBOOKS_EVAL, KUBEVIRT, *KUBEVIRT_SETS)
    recorder = InvocationStore(tmp_path_factory.mktemp("traffic") / "invocations.duckdb")
    expected = record_sets(
        runbooks_corpus, runbooks_store, embedder, base_settings.with_(collection="TestRunbooks"), recorder, [RUNBOOKS_EVAL]
    )
    corpus = load_corpus(KUBEVIRT)
    knowledge = KnowledgeStore(weaviate_client, "TestKubevirt")
    knowledge.drop()
    indexing.ingest(knowledge, corpus, embedder)
    expected |= record_sets(corpus, knowledge, embedder, base_settings.with_(collection="TestKubevirt"), recorder, KUBEVIRT_SETS)
    recorder.flush()
    return recorder, expected


def wrong_share(recorder, expected, strategy, seed=0) -> float:
    queue = build_queue(recorder, InvocationFilter(), strategy=strategy, target=FIRST, seed=seed)
    assert len(queue.calls) == FIRST
    return sum(c.top_entry_id not in expected[c.invocation_id] for c in queue.calls) / FIRST


def test_least_sure_first_finds_more_wrong_top_results_than_random(traffic):
    recorder, expected = traffic
    cases = {tag: recorder.count(tag) for tag in ("runbooks-alert-summaries", *(p.stem for p in KUBEVIRT_SETS))}
    assert sum(cases.values()) == len(expected) == recorder.count()
    rows = recorder.query("SELECT id, top_entry_id FROM tool_invocation")
    overall = mean(top not in expected[i] for i, top in zip(rows["id"], rows["top_entry_id"], strict=True))
    least = wrong_share(recorder, expected, LEAST_SURE)
    nearest = wrong_share(recorder, expected, NEAREST)
    randoms = [wrong_share(recorder, expected, RANDOM, seed) for seed in SEEDS]
    print(
        f"cases {cases}; wrong top overall {overall:.3f}; among the first {FIRST}: least sure {least:.2f}, "
        f"nearest the threshold {nearest:.2f}, random {mean(randoms):.3f} (seeds {list(SEEDS)}: {randoms})"
    )
    assert least > mean(randoms)
