"""Why not this entry, on every shared set (both corpora, every style): each miss of `lookup` has exactly one cause and
the counts sum to the misses; the trace of each missed entry reports the ranks the lookup gives at a larger top_k; and
every change "what it would take" finds, applied through the lookup's own surface, puts the entry at the rank claimed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval.core.corpus import load_corpus
from retrieval.core.explain import explain_entry
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge, search_text
from retrieval.core.miss_cause import MissCause
from retrieval.core.protocols import LookupServices
from retrieval.core.remedies import FILTER_OFF, Tried, what_it_would_take
from retrieval.core.runner import RunOptions, candidate_depth, lookup_pipeline, run_pipeline
from retrieval.evals.causes import answerable_misses, counts
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.store import indexing
from retrieval.store.support_fit import ensure_fit

from ..conftest import KUBEVIRT, RUNBOOKS, SHARED, needs_shared

pytestmark = pytest.mark.slow  # every shared set through a real Weaviate, and each miss explained

SETS = SHARED / "eval_sets"
DEEP = 50  # results kept where a rank is looked up (what it would take keeps as many)


def shared_sets() -> list[str]:
    """Every shared eval set's name (read from the folder: the sets change between turns)."""
    return sorted(p.stem for p in SETS.glob("*.yaml")) or ["(no shared eval sets)"]


@pytest.fixture(scope="module")
def sides(weaviate_client, embedder, base_settings):
    """Each corpus's services as a user's ingest leaves them (its own support fit), by the corpus folder's name."""
    from retrieval.store.weaviate_store import KnowledgeStore

    needs_shared(RUNBOOKS, KUBEVIRT, SETS)
    out = {}
    for folder, collection in ((RUNBOOKS, "TestRunbooks"), (KUBEVIRT, "TestKubevirt")):
        corpus = load_corpus(folder)
        store = KnowledgeStore(weaviate_client, collection)
        indexing.ingest(store, corpus, embedder)  # brings the collection up to date (other modules share it)
        settings = base_settings.with_(collection=collection)
        services = LookupServices(L0Index(corpus.entries), embedder, store)
        norms, _ = ensure_fit(store, corpus, services, settings)
        out[folder.name] = (corpus, replace(services, norms=norms), settings)
    return out


def _rank(query: str, entry_id: str, services: LookupServices, options, top_k: int) -> int | None:
    result = lookup_knowledge(query, services, options, top_k=top_k)
    return next((i + 1 for i, r in enumerate(result.results) if r.entry_id == entry_id), None)


def _lookup_rank(query: str, entry_id: str, services: LookupServices, options) -> tuple[int | None, int]:
    """The entry's rank in the lookup at the largest top_k that leaves its ranking as it is (a top_k above the candidate
    depth deepens the lists too), and that top_k."""
    deepest = candidate_depth(options)
    return _rank(query, entry_id, services, options, deepest), deepest


def _applied_rank(tried: Tried, query: str, entry_id: str, services: LookupServices, options) -> int | None:
    """The entry's rank with the change applied as a user would: the setting changed (or the pipeline unrouted)."""
    change = tried.change
    if change.setting == FILTER_OFF:
        unrouted = replace(lookup_pipeline(options), routed=False)
        run = run_pipeline(search_text(query), unrouted, services, options, RunOptions(k=DEEP))
        return next((i + 1 for i, r in enumerate(run.results) if r.entry_id == entry_id), None)
    changed = options.with_(**{change.setting: change.value})
    return _rank(query, entry_id, services, changed, candidate_depth(changed))  # a claimed rank is in the top k


@pytest.mark.parametrize("name", shared_sets())
def test_every_miss_has_one_cause_its_trace_ranks_as_the_lookup_does_and_each_remedy_holds(name, sides):
    path = SETS / f"{name}.yaml"
    needs_shared(path)
    corpus_dir = load_eval_set(path).corpus_dir
    assert corpus_dir is not None, f"{path}: names no corpus"
    corpus, services, settings = sides[corpus_dir.name]
    eval_set = load_eval_set(path, known_ids=[e.entry_id for e in corpus.entries])
    report = run_eval(eval_set, services, settings, configs=("lookup",))
    options = settings.options()

    misses = [c for c in report.cases if c.configs["lookup"].miss is not None]
    for case in report.cases:
        outcome = case.configs["lookup"]
        top = outcome.ranking[0] if outcome.ranking else None
        answerable = any(g > 0 for g in case.expected.values())
        missed = top is None or case.expected.get(top, 0) <= 0 if answerable else outcome.semantic_support
        assert (outcome.miss is not None) == bool(missed), (case.id, outcome.miss, top)
        if outcome.miss is not None:
            assert isinstance(outcome.miss.cause, MissCause)
            assert (outcome.miss.cause is MissCause.ANSWERED_UNANSWERABLE) == (not answerable), case.id
    by_cause = counts(report.cases, "lookup")
    assert sum(by_cause.values()) == len(misses)
    assert answerable_misses(by_cause) == sum(1 for c in misses if any(g > 0 for g in c.expected.values()))

    claims = 0
    for case in misses:
        miss = case.configs["lookup"].miss
        assert miss is not None
        if miss.entry_id is None:  # answered though unanswerable, or the expected entry is not in the knowledge base
            continue
        trace = explain_entry(case.query, miss.entry_id, services, options)
        assert trace.miss is not None and trace.miss.cause is miss.cause, (case.id, trace.miss, miss)
        shown, deepest = _lookup_rank(case.query, miss.entry_id, services, options)
        if shown is not None or trace.rank is None:
            assert trace.rank == shown, case.id
        else:  # below what the lookup shows at that depth: the trace places it further down
            assert trace.rank > deepest, case.id
        assert trace.rank == miss.rank or miss.rank is None, case.id  # the eval's rank is cut at its depth
        if trace.l0.rank is not None:
            assert trace.l0.rank <= trace.l0.matched_entries
        remedies = what_it_would_take(case.query, miss.entry_id, services, options)
        assert remedies.rank == trace.rank or (remedies.rank is None and (trace.rank or 0) > 50), case.id
        for tried in (remedies.first, remedies.into_top_k):
            if tried is None:
                continue
            claims += 1
            got = _applied_rank(tried, case.query, miss.entry_id, services, options)
            assert got == tried.rank, (case.id, tried.change.label, got, tried.rank)
            assert got is not None and got <= options.top_k
        if remedies.first is not None:
            assert remedies.first.rank == 1
    print(f"{name}: {len(report.cases)} cases, {len(misses)} misses {dict(by_cause)}, {claims} remedies checked")
