"""The lookup's L1 queries and the similarities of its BM25F-only results, against the session's real
embedded Weaviate (the sample corpus). The spec's flow itself is in test_spec_scenarios."""

from __future__ import annotations

import pytest

from retrieval.hints import L0Index
from retrieval.lookup import LookupServices, l1_queries, lookup_knowledge, with_similarities
from retrieval.ranking import ResultItem
from retrieval.weaviate_store import KnowledgeStore

QUERY = "disk full no space left on device"


@pytest.fixture
def settings(base_settings):
    return base_settings.with_(collection="TestSample", top_k=10, search_mode="fusion")


def card_similarities(store: KnowledgeStore, vector, query: str) -> dict[str, float]:
    """The similarity of the query to each BM25F hit's card, as a BM25F query given the vector computes it
    from the stored vectors it returns."""
    hits = store.search(vector, k=50, mode="bm25", query_text=query)
    return {h.entry_id: h.similarity for h in hits if h.similarity is not None}


def test_bm25f_candidates_take_the_vector_querys_similarity_or_none(sample_store, embedder, settings):
    vector = embedder.embed_query(QUERY)
    found, lexical = l1_queries(sample_store, vector, text=QUERY, category=None, settings=settings)
    by_vector = {c.entry_id: c.similarity for c in found}
    assert lexical and found
    assert any(c.entry_id in by_vector for c in lexical)
    for c in lexical:
        assert c.similarity == by_vector.get(c.entry_id)  # the entry's best chunk, or None: no vectors fetched
    assert [c.entry_id for c in lexical] == [
        c.entry_id for c in sample_store.search(vector, k=len(lexical), mode="bm25", query_text=QUERY)
    ]


def test_bm25f_only_results_get_their_card_similarity(sample_store, embedder, settings):
    vector = embedder.embed_query(QUERY)
    cards = card_similarities(sample_store, vector, QUERY)
    ids = sorted(cards)[:3]
    items = [ResultItem(e, e, e.split("/")[0], 1.0, "L1", lexical_score=5.0) for e in ids]
    known = ResultItem("x/Known", "Known", "x", 0.9, "L1", l1_score=0.42, lexical_score=3.0)
    l0_only = ResultItem("x/OnlyL0", "OnlyL0", "x", 0.1, "L0", l0_score=2.0)
    out = with_similarities([*items, known, l0_only], sample_store, vector, settings)
    assert [r.l1_score for r in out[:3]] == pytest.approx([cards[e] for e in ids], abs=1e-4)
    assert out[3] == known and out[4] == l0_only  # a similarity already there, and L0 alone: left as they are
    assert with_similarities(items, sample_store, None, settings) == tuple(items)  # no vector: nothing to ask


def test_a_failed_card_query_leaves_the_results_without_a_similarity(weaviate_client, embedder, settings):
    """A real failure: the collection does not exist on the server. The results stay, claiming nothing."""
    missing = KnowledgeStore(weaviate_client, "NoSuchCollectionHere")
    items = (ResultItem("a/X", "X", "a", 1.0, "L1", lexical_score=5.0),)
    assert with_similarities(items, missing, embedder.embed_query(QUERY), settings) == items


def test_a_lookup_shows_every_l1_result_with_its_similarity(sample_corpus, sample_store, embedder, settings):
    """Ranked by BM25F alone, the lookup shows entries the vector query did not reach: each still carries the
    similarity of the query to its card, as the BM25F query with vectors gives it."""
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    lexical_only = settings.with_(vector_weight=0.0, l0_weight=0.0, name_weight=0.0, top_k=20)
    query = "replication lag standby certificate expiry queue backlog"
    result = lookup_knowledge(query, services, lexical_only)
    vector = embedder.embed_query(result.searched or result.query)
    cards = card_similarities(sample_store, vector, result.searched or result.query)
    reached = {c.entry_id for c in result.l1.candidates}
    shown_alone = [r for r in result.results if r.lexical_score is not None and r.entry_id not in reached]
    assert shown_alone, "the query should show BM25F hits the vector query did not reach"
    for r in shown_alone:
        assert r.l1_score == pytest.approx(cards[r.entry_id], abs=1e-4)
    assert all(r.l1_score is not None for r in result.results if r.source != "L0")
