"""The lookup's L1 queries and the similarities of its BM25F-only results, against the session's real
embedded Weaviate (the sample corpus). The spec's flow itself is in test_spec_scenarios."""

from __future__ import annotations

import pytest

from retrieval.core.hints import L0Index
from retrieval.core.l1_search import search_l1
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.core.ranking import CardQuery, ResultItem, with_card_similarities
from retrieval.core.record import InvocationRecord, utc_now_iso
from retrieval.core.runner import lookup_pipeline
from retrieval.core.search_request import SearchRequest
from retrieval.records.invocations import InvocationStore, routing_of
from retrieval.store.weaviate_store import KnowledgeStore
from retrieval.traffic.features import names_entry_of
from retrieval.types.modes import SearchMode

QUERY = "disk full no space left on device"


@pytest.fixture
def settings(base_settings):
    return base_settings.with_(collection="TestSample", top_k=10, search_mode="fusion")


def card_similarities(store: KnowledgeStore, vector, query: str) -> dict[str, float]:
    """The similarity of the query to each BM25F hit's card, as a BM25F query given the vector computes it
    from the stored vectors it returns."""
    hits = store.search(SearchRequest(SearchMode.BM25, 50, vector, text=query))
    return {h.entry_id: h.similarity for h in hits if h.similarity is not None}


def test_bm25f_candidates_take_the_vector_querys_similarity_or_none(sample_store, embedder, settings):
    vector = embedder.embed_query(QUERY)
    found, lexical = search_l1(
        sample_store, lookup_pipeline(settings.options()).queries, text=QUERY, vector=vector, category=None
    )
    by_vector = {c.entry_id: c.similarity for c in found}
    assert lexical and found
    assert any(c.entry_id in by_vector for c in lexical)
    for c in lexical:
        assert c.similarity == by_vector.get(c.entry_id)  # the entry's best chunk, or None: no vectors fetched
    assert [c.entry_id for c in lexical] == [
        c.entry_id for c in sample_store.search(SearchRequest(SearchMode.BM25, len(lexical), vector, text=QUERY))
    ]


def test_bm25f_only_results_get_their_card_similarity(sample_store, embedder, settings):
    vector = embedder.embed_query(QUERY)
    cards = card_similarities(sample_store, vector, QUERY)
    ids = sorted(cards)[:3]
    items = [ResultItem(e, e, e.split("/")[0], 1.0, "L1", lexical_score=5.0) for e in ids]
    known = ResultItem("x/Known", "Known", "x", 0.9, "L1", l1_score=0.42, lexical_score=3.0)
    l0_only = ResultItem("x/OnlyL0", "OnlyL0", "x", 0.1, "L0", l0_score=2.0)
    out = with_card_similarities([*items, known, l0_only], CardQuery(sample_store, vector, settings.l1_timeout_s))
    assert [r.l1_score for r in out[:3]] == pytest.approx([cards[e] for e in ids], abs=1e-4)
    assert out[3] == known and out[4] == l0_only  # a similarity already there, and L0 alone: left as they are
    assert with_card_similarities(items, CardQuery(sample_store, None, settings.l1_timeout_s)) == tuple(
        items
    )  # no vector: nothing to ask


def test_a_failed_card_query_leaves_the_results_without_a_similarity(weaviate_client, embedder, settings):
    """A real failure: the collection does not exist on the server. The results stay, claiming nothing."""
    missing = KnowledgeStore(weaviate_client, "NoSuchCollectionHere")
    items = (ResultItem("a/X", "X", "a", 1.0, "L1", lexical_score=5.0),)
    assert with_card_similarities(items, CardQuery(missing, embedder.embed_query(QUERY), settings.l1_timeout_s)) == items


def test_a_lookup_shows_every_l1_result_with_its_similarity(sample_corpus, sample_store, embedder, settings):
    """Ranked by BM25F alone, the lookup shows entries the vector query did not reach: each still carries the
    similarity of the query to its card, as the BM25F query with vectors gives it."""
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    lexical_only = settings.with_(vector_weight=0.0, l0_weight=0.0, name_weight=0.0, top_k=20)
    query = "replication lag standby certificate expiry queue backlog"
    result = lookup_knowledge(query, services, lexical_only.options())
    vector = embedder.embed_query(result.searched or result.query)
    cards = card_similarities(sample_store, vector, result.searched or result.query)
    reached = {c.entry_id for c in result.l1.candidates}
    shown_alone = [r for r in result.results if r.lexical_score is not None and r.entry_id not in reached]
    assert shown_alone, "the query should show BM25F hits the vector query did not reach"
    for r in shown_alone:
        assert r.l1_score == pytest.approx(cards[r.entry_id], abs=1e-4)
    assert all(r.l1_score is not None for r in result.results if r.source != "L0")


def test_a_call_records_its_domains_and_the_filter_only_when_one_was_applied(
    sample_corpus, sample_store, embedder, db_path, settings
):
    """`domain` is the domain of the filter L1 applied, and empty for an unfiltered call (never its first hinted domain)."""
    recorder = InvocationStore(db_path)
    try:
        services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
        several = lookup_knowledge("disk full", services, settings.options())
        one = lookup_knowledge("Pod keeps restarting", services, settings.options())
        off = lookup_knowledge("Pod keeps restarting", services, settings.with_(l1_enabled=False).options())
        assert len(set(several.l0.domains)) > 1 and one.l0.domains == off.l0.domains == ("kubernetes",)
        want = {
            several.invocation_id: (list(several.l0.domains), None),
            one.invocation_id: (["kubernetes"], "kubernetes"),
            off.invocation_id: (["kubernetes"], None),  # L1 did not run: no filter was applied
        }
        for invocation_id, (domains, applied) in want.items():
            row = recorder.get(invocation_id)
            assert row is not None
            details = row["retrieval_details"]
            assert (row["domain"], details["domains"], details["filter"]) == (applied, domains, applied)
            assert routing_of(details) == (tuple(domains), applied)
    finally:
        recorder.close()


@pytest.mark.parametrize(
    ("l1", "want"),
    [
        ({"status": "ok", "filter": None}, (("databases", "storage"), None)),
        ({"status": "ok", "filter": {"category": "databases"}}, (("databases", "storage"), "databases")),
        ({"status": "disabled", "filter": {"category": "databases"}}, (("databases", "storage"), None)),
    ],
)
def test_rows_recorded_before_the_domain_list_still_read(db_path, l1, want):
    """An older row: `domain` holds the first hinted domain, and details have no `domains` or `filter`."""
    recorder = InvocationStore(db_path)
    try:
        details = {"layer": "L0+L1", "l0": {"domains": ["databases", "storage"]}, "l1": l1, "timings_ms": {}}
        recorder.record(
            InvocationRecord(
                "old-1", utc_now_iso(), "lookup_knowledge", "disk full", "ok", "L0+L1", 1.0, {"results": []}, details,
                None, "old", "databases", l1["status"], False, None,
            )
        )  # fmt: skip
        row = recorder.get("old-1")
        assert row is not None and row["domain"] == "databases"
        assert routing_of(row["retrieval_details"]) == want
    finally:
        recorder.close()


def test_a_call_records_the_collection_it_searched_and_its_traffic_columns(
    sample_corpus, sample_store, embedder, db_path, settings
):
    """The options name the collection; the row keeps it and the typed traffic columns equal its JSON."""
    recorder = InvocationStore(db_path)
    try:
        services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
        calls = [
            lookup_knowledge(q, services, settings.options())
            for q in ("Pod keeps restarting", "disk full", "zebra migration", "PodCrashLoopBackOff")
        ]
        recorder.flush()
        sql = "SELECT id, support, supported, support_fit, l0_matched, names_entry, top_domain, collection FROM tool_invocation"
        stored = {r[0]: r[1:] for r in recorder.with_connection(lambda con: con.execute(sql).fetchall(), read_only=True)}
        for call in calls:
            rel, base = call.relevance, (call.relevance.fit or {}).get("baselines") or {}
            want = (
                rel.confidence if rel.confidence is None else round(rel.confidence, 4),
                rel.semantic_support,
                f"{base['kind']}:{base['id']}" if base else None,
                call.l0.has_match,
                names_entry_of(call.l0),
                call.results[0].domain if call.results else None,
                "TestSample",
            )
            assert stored[call.invocation_id] == want
        assert any(v[3] for v in stored.values()) and not all(v[3] for v in stored.values())  # L0 matched some, not all
        assert any(v[4] for v in stored.values()) and not all(v[4] for v in stored.values())  # one names an entry
    finally:
        recorder.close()
