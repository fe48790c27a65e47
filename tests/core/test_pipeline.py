"""The one pipeline: which retrievers each caller runs (a table, no server), the store request they build, and
the L1 step against the session's real embedded Weaviate (the sample corpus)."""

from __future__ import annotations

import re

import pytest

from retrieval.config import Settings as _Settings
from retrieval.core.hints import L0Hints
from retrieval.core.l1_search import search_l1
from retrieval.core.pipeline import L1Query, Pipeline
from retrieval.core.runner import lookup_pipeline, route
from retrieval.core.search_request import SearchRequest
from retrieval.errors import EvalSetError, QueryError
from retrieval.evals.comparison import comparison_pipeline
from retrieval.evals.configs import CONFIGS, config_pipeline
from retrieval.lab.sweep import QueryKey, query_keys
from retrieval.types.modes import L1Status, SearchMode

NV, BM, HY = SearchMode.NEAR_VECTOR, SearchMode.BM25, SearchMode.HYBRID
D = _Settings().candidate_depth


@pytest.fixture
def settings(base_settings):
    return base_settings.with_(collection="TestSample", top_k=10, hybrid_alpha=0.3)


def shape(p: Pipeline) -> tuple:
    return p.routed, tuple((q.mode, q.depth, q.with_vector, q.grouped) for q in p.queries)


@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("fusion", (True, ((NV, D, True, True), (BM, D, False, False)))),
        ("near_vector", (True, ((NV, D, True, True),))),
        ("hybrid", (True, ((HY, D, True, True),))),
    ],
)
def test_the_lookup_pipeline_of_each_mode(settings, mode, want):
    assert shape(lookup_pipeline(settings.with_(search_mode=mode).options())) == want


@pytest.mark.parametrize(
    ("config", "want"),
    [
        ("l0_only", (True, ())),
        ("l1_unfiltered", (False, ((NV, 10, True, False),))),
        ("l1_filtered", (True, ((NV, 10, True, False),))),
        ("bm25", (True, ((BM, 10, True, False),))),
        ("hybrid", (False, ((HY, 10, True, False),))),
        ("lookup", (True, ((NV, D, True, True), (BM, D, False, False)))),
    ],
)
def test_each_eval_configuration_is_a_named_list_of_retrievers(settings, config, want):
    pipeline = config_pipeline(config, settings.with_(search_mode="fusion").options())
    assert pipeline.name == config and shape(pipeline) == want
    assert set(CONFIGS) >= {config}


def test_an_unknown_configuration_or_compared_query_is_refused(settings):
    with pytest.raises(EvalSetError, match=re.escape("unknown configuration: l2 (known: l0_only")):
        config_pipeline("l2", settings.options())
    with pytest.raises(QueryError, match=re.escape("L1 query 'bm42' is not one of near_vector, bm25, hybrid, fusion")):
        comparison_pipeline("bm42", settings.options())


def test_the_comparison_and_the_sweep_ask_what_the_lookup_asks(settings):
    fusion = settings.with_(search_mode="fusion")
    assert shape(comparison_pipeline("fusion", settings.options()))[1] == shape(lookup_pipeline(fusion.options()))[1]
    assert shape(comparison_pipeline("bm25", settings.options())) == (True, ((BM, 10, True, False),))
    # the sweep's keys are the lookup's queries (each fetching similarities, for the support estimate)
    assert query_keys(fusion) == (QueryKey("near_vector", D), QueryKey("bm25", D))
    assert query_keys(settings.with_(search_mode="hybrid")) == (QueryKey("hybrid", D, 0.3),)
    assert [k.query(fusion) for k in query_keys(fusion)] == [L1Query(NV, D, 0.3), L1Query(BM, D, 0.3)]


@pytest.mark.parametrize(
    ("domains", "routed", "want"),
    [(("kubernetes",), True, "kubernetes"), (("kubernetes",), False, None), (("a", "b"), True, None), ((), True, None)],
)
def test_route_filters_only_a_routed_pipeline_with_one_domain(domains, routed, want):
    hints = L0Hints("q", (), (), domains, (), ())
    assert route(hints, Pipeline("p", routed=routed)) == want


def test_a_request_is_checked_before_any_query():
    with pytest.raises(ValueError, match=re.escape("'fusion' is not a valid SearchMode")):
        SearchRequest("fusion", 5, [0.1])
    with pytest.raises(ValueError, match=re.escape("a near_vector search needs a query vector")):
        SearchRequest(NV, 5)
    with pytest.raises(ValueError, match=re.escape("a search limit must be at least 1, got 0")):
        SearchRequest(BM, 0, text="x")
    assert SearchRequest("bm25", 3, text="x").mode is BM


def test_a_query_without_vectors_or_grouping_leaves_them_out_of_its_request():
    lexical = L1Query(BM, 7, with_vector=False).request("disk", [0.5], "db", entries=12, timeout_s=2.0)
    assert (lexical.vector, lexical.entries, lexical.category, lexical.limit, lexical.timeout_s) == (None, None, "db", 7, 2.0)
    grouped = L1Query(NV, 7, grouped=True).request("disk", [0.5], None, entries=12)
    assert (grouped.vector, grouped.entries) == ([0.5], 12)
    assert SearchRequest.cards([0.5], ["a/X", "b/Y"]).cards_of == ("a/X", "b/Y")


def test_l1_status_reads_as_its_recorded_text():
    assert [s.value for s in L1Status] == ["ok", "empty", "failed", "disabled", "unavailable"]
    assert L1Status("ok") is L1Status.OK and L1Status.FAILED == "failed" and f"{L1Status.EMPTY}" == "empty"
    assert [s for s in L1Status if s.fault] == [L1Status.FAILED, L1Status.UNAVAILABLE]


def test_search_l1_runs_each_query_as_the_store_would_alone(sample_store, embedder, settings):
    query = "disk full no space left on device"
    vector = embedder.embed_query(query)
    queries = (L1Query(NV, 10), L1Query(BM, 10, with_vector=False), L1Query(HY, 5, 0.3))
    found = search_l1(sample_store, queries, text=query, vector=vector, category=None)
    alone = [sample_store.search(q.request(query, vector, None)) for q in queries]
    assert [[c.entry_id for c in f] for f in found] == [[c.entry_id for c in a] for a in alone]
    assert found[0] and found[1] and found[2]
    # the BM25F query fetched no vectors: each of its candidates has the vector query's similarity, or none
    sims = {c.entry_id: c.similarity for c in found[0]}
    assert [c.similarity for c in found[1]] == [sims.get(c.entry_id) for c in found[1]]
    filtered = search_l1(sample_store, queries[:1], text=query, vector=vector, category="kubernetes")[0]
    assert filtered and {c.domain for c in filtered} == {"kubernetes"}


def test_the_store_takes_only_a_search_request(sample_store, embedder):
    vector = embedder.embed_query("Pod keeps restarting")
    with pytest.raises(TypeError, match="SearchRequest"):
        sample_store.search(vector)
    with pytest.raises(ValueError, match=re.escape("'fusion' is not a valid SearchMode")):
        SearchRequest("fusion", 5, vector)


@pytest.mark.parametrize("mode", [SearchMode.NEAR_VECTOR, SearchMode.BM25, SearchMode.HYBRID])
def test_one_query_alone_is_assessed_in_a_sentence_that_says_which(settings, mode):
    from retrieval.core.candidates import Candidate
    from retrieval.core.runner import rank_and_assess

    found = (
        Candidate("db/PostgresReplicationLag", "Postgres Replication Lag", "db", 0.2, 0.8, 1, "lag", 0.8),
        Candidate("db/PostgresDown", "Postgres Down", "db", 0.4, 0.6, 1, "down", 0.6),
    )
    pipeline = Pipeline(f"{mode} alone", (L1Query(mode, 10),))
    results, relevance = rank_and_assess((), (found,), pipeline, settings.options(), "replication lag", L1Status.OK, k=5)
    assert [r.entry_id for r in results] == ["db/PostgresReplicationLag", "db/PostgresDown"]
    assert relevance.reason.startswith(f"The {mode} query alone: an estimated ") and relevance.reason.endswith(".")
