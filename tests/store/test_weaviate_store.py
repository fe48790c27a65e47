"""KnowledgeStore against the real embedded Weaviate of the test session."""

from __future__ import annotations

import pytest

from retrieval.core.corpus import Corpus
from retrieval.core.search_request import SearchRequest
from retrieval.store import indexing
from retrieval.store.search_query import category_where
from retrieval.store.weaviate_store import KnowledgeStore
from retrieval.types.modes import SearchMode

from ..helpers.entries import make_entry

NV = SearchMode.NEAR_VECTOR


def test_category_filter_is_exact_not_word_tokenised(store, embedder):
    corpus = Corpus(
        "mem",
        (
            make_entry("a/Verified", "Verified", "The account is verified."),
            make_entry("b/NotVerified", "Not Verified", "The account is not verified."),
            make_entry("c/verified-lower", "verified", "lower case category."),
        ),
    )
    indexing.ingest(store, corpus, embedder)
    vec = embedder.embed_query("account verification")
    assert {c.entry_id for c in store.search(SearchRequest(NV, 10, vec, category="Verified"))} == {"a/Verified"}
    assert {c.entry_id for c in store.search(SearchRequest(NV, 10, vec, category="Not Verified"))} == {"b/NotVerified"}
    assert {c.entry_id for c in store.search(SearchRequest(NV, 10, vec))} == {
        "a/Verified",
        "b/NotVerified",
        "c/verified-lower",
    }
    assert store.search(SearchRequest(NV, 10, vec, category="nothing-here")) == []


def test_filter_is_built_in_one_place():
    assert category_where(None) is None
    f = category_where("kubernetes")
    assert f.target == "category" and f.value == "kubernetes"


def test_long_entries_are_chunked_and_folded_back(store, embedder):
    filler = " ".join(f"routine maintenance note number {i} about nothing in particular." for i in range(120))
    needle = "The unique failure mode is a frozen hydrant valve in the basement."
    long = make_entry("ops/Long", "ops", filler + " " + needle)
    short = make_entry("ops/Short", "ops", "A different article about printers.")
    report = indexing.ingest(store, Corpus("mem", (long, short)), embedder)
    assert report.chunks_embedded > 3  # the model saw all of the long entry, window by window
    hits = store.search(SearchRequest(NV, 5, embedder.embed_query("frozen hydrant valve")))
    assert [h.entry_id for h in hits].count("ops/Long") == 1  # folded: one candidate per entry
    assert hits[0].entry_id == "ops/Long" and hits[0].chunk_index > 0  # found by its last chunk


def test_hybrid_search_obeys_the_filter(sample_store, embedder):
    query = "disk full no space left on device"
    vec = embedder.embed_query(query)
    for category in ("storage", "databases", "observability"):
        hits = sample_store.search(SearchRequest(SearchMode.HYBRID, 5, vec, text=query, category=category, alpha=0.5))
        assert hits and {h.domain for h in hits} == {category}
    unfiltered = sample_store.search(SearchRequest(SearchMode.HYBRID, 10, vec, text=query, alpha=0.5))
    assert len({h.domain for h in unfiltered}) > 1
    assert all(0.0 <= h.score <= 1.0 + 1e-6 for h in unfiltered)


def test_near_vector_ranks_by_distance(sample_store, embedder):
    hits = sample_store.search(
        SearchRequest(NV, 5, embedder.embed_query("Postgres standby replica is falling behind the primary"))
    )
    assert hits[0].entry_id == "databases/PostgresReplicationLag"
    assert [h.distance for h in hits] == sorted(h.distance for h in hits)
    assert all(abs(h.score - (1 - h.distance)) < 1e-6 for h in hits)


def _exhaustive_top(store, vec, k, category=None):
    """The true top-k entries: every chunk fetched, folded by best chunk."""
    from weaviate.classes.query import MetadataQuery

    from retrieval.store.search_query import fold_chunks

    res = store.collection.query.near_vector(
        near_vector=list(map(float, vec)),
        limit=10_000,
        filters=category_where(category),
        return_metadata=MetadataQuery(distance=True, score=True),
        return_properties=["entry_id", "title", "category", "chunk_index", "text"],
    )
    return [c.entry_id for c in fold_chunks(res.objects, k=k)]


def test_entries_of_one_chunk_are_fetched_k_hits_at_a_time(store, embedder):
    # a title and no body: the card is the entry's only chunk
    indexing.ingest(
        store,
        Corpus(
            "mem", tuple(make_entry(f"d/E{i}", "d", "", title=f"Note {i} on service {i} latency and errors.") for i in range(30))
        ),
        embedder,
    )
    for q in ("latency of service 3", "errors everywhere", "note twelve"):
        vec = embedder.embed_query(q)
        assert [c.entry_id for c in store.search(SearchRequest(NV, 5, vec))] == _exhaustive_top(store, vec, 5)
    assert store.fold_factor == 1  # five hits always held five entries


def test_entries_of_many_chunks_still_give_k_entries(store, embedder):
    """Chunks of one long entry crowd the first k hits: the search asks again with more and stays there."""
    filler = " ".join(f"kafka broker partition {i} under-replicated, consumer lag rising." for i in range(150))
    entries = [make_entry("mq/KafkaLong", "mq", filler)] + [
        make_entry(f"mq/Other{i}", "mq", f"Queue topic {i} notes about brokers.") for i in range(8)
    ]
    indexing.ingest(store, Corpus("mem", tuple(entries)), embedder)
    assert store.count_chunks() > 6
    vec = embedder.embed_query("kafka partition under-replicated consumer lag")
    fresh = KnowledgeStore(store.client, store.name)
    hits = fresh.search(SearchRequest(NV, 5, vec))
    assert [h.entry_id for h in hits] == _exhaustive_top(store, vec, 5) and len(hits) == 5
    assert fresh.fold_factor > 1
    assert [h.entry_id for h in fresh.search(SearchRequest(NV, 5, vec, category="mq"))] == _exhaustive_top(store, vec, 5, "mq")


def test_grouped_by_entry_the_search_gives_the_same_entries_and_stops_at_the_known_count(store, embedder):
    """With the entry count known, Weaviate groups the chunk hits by entry: the same top k, best chunk each,
    and a domain with fewer entries than k is not asked again and again."""
    filler = " ".join(f"kafka broker partition {i} under-replicated, consumer lag rising." for i in range(150))
    entries = [make_entry("mq/KafkaLong", "mq", filler)] + [
        make_entry(f"mq/Other{i}", "mq", f"Queue topic {i} notes about brokers.") for i in range(8)
    ]
    entries += [make_entry(f"db/Note{i}", "db", f"Database note {i} on replication.") for i in range(3)]
    indexing.ingest(store, Corpus("mem", tuple(entries)), embedder)
    vec = embedder.embed_query("kafka partition under-replicated consumer lag")
    plain = KnowledgeStore(store.client, store.name).search(SearchRequest(NV, 5, vec))
    grouped = KnowledgeStore(store.client, store.name)
    hits = grouped.search(SearchRequest(NV, 5, vec, entries=len(entries)))
    assert [h.entry_id for h in hits] == [h.entry_id for h in plain] == _exhaustive_top(store, vec, 5)
    assert [(h.chunk_index, round(h.distance, 5)) for h in hits] == [(h.chunk_index, round(h.distance, 5)) for h in plain]
    assert [h.similarity for h in hits] == pytest.approx([h.similarity for h in plain])
    small = KnowledgeStore(store.client, store.name)
    few = small.search(SearchRequest(NV, 5, vec, category="db", entries=3))
    assert sorted(h.entry_id for h in few) == ["db/Note0", "db/Note1", "db/Note2"]
    assert small.fold_factor == 1  # three of three entries found at once: no second query


def test_bm25_scores_whole_entries_by_their_fields_and_obeys_the_filter(store, embedder):
    corpus = Corpus(
        "mem",
        (
            make_entry("cdi/CDINotReady", "cdi", "## Meaning\nThe importer is degraded.", title="CDINotReady"),
            make_entry("net/KubemacpoolDown", "net", "## Meaning\nThe MAC pool is down.", keywords=("mac address",)),
            make_entry("vm/VMStuck", "vm", "## Meaning\nA virtual machine is stuck while starting."),
        ),
    )
    indexing.ingest(store, corpus, embedder)
    query = "CDI is not ready"
    vec = embedder.embed_query(query)
    hits = store.search(SearchRequest(SearchMode.BM25, 5, vec, text=query))
    assert hits[0].entry_id == "cdi/CDINotReady"  # by the split file name ("CDI Not Ready")
    assert len({h.entry_id for h in hits}) == len(hits)  # one hit per entry: only cards carry the fields
    assert hits[0].chunk_index == 0 and hits[0].distance is None
    assert store.search(SearchRequest(SearchMode.BM25, 5, vec, text="mac address"))[0].entry_id == "net/KubemacpoolDown"
    assert store.search(SearchRequest(SearchMode.BM25, 5, vec, text="stuck virtual machine"))[0].entry_id == "vm/VMStuck"
    assert store.search(SearchRequest(SearchMode.BM25, 5, vec, text=query, category="vm")) == []
    assert store.search(SearchRequest(SearchMode.BM25, 5, None, text=query))[0].similarity is None  # no vector, no similarity


def test_every_mode_reports_the_real_similarity_of_the_best_chunk(sample_store, embedder):
    query = "disk full no space left on device"
    vec = embedder.embed_query(query)
    near = {h.entry_id: h.similarity for h in sample_store.search(SearchRequest(NV, 50, vec))}
    for mode in ("hybrid", "bm25"):
        for h in sample_store.search(SearchRequest(SearchMode(mode), 5, vec, text=query)):
            assert h.similarity is not None and -1.0 <= h.similarity <= 1.0
            if mode == "hybrid" and h.entry_id in near:  # hybrid returns the chunks near_vector ranks best
                assert h.similarity == pytest.approx(near[h.entry_id], abs=1e-4)


def test_a_collection_is_never_searched_or_topped_up_with_another_models_vectors(store, embedder):
    """The collection names the model of its vectors; a store searched with another model's vectors refuses
    (L1Error, so the lookup falls back to L0 saying why), and so does an ingest with another model."""
    from retrieval.errors import L1Error, StoreError
    from retrieval.store.embedding import Embedder

    corpus = Corpus("mem", (make_entry("a/One", "ops", "Disk is full on the node."),))
    indexing.ingest(store, corpus, embedder)
    assert store.stored_model() == embedder.spec.name
    chunks = store.count_chunks()
    vec = embedder.embed_query("disk full")
    same = KnowledgeStore(store.client, store.name, embedding_model=embedder.spec.name)
    assert [c.entry_id for c in same.search(SearchRequest(NV, 3, vec))] == ["a/One"]
    other_name = "all-MiniLM-L6-v2" if embedder.spec.name != "all-MiniLM-L6-v2" else "bge-small-en-v1.5"
    other = KnowledgeStore(store.client, store.name, embedding_model=other_name)
    with pytest.raises(L1Error, match=f"holds vectors of the embedding model {embedder.spec.name}"):
        other.search(SearchRequest(NV, 3, vec))
    with pytest.raises(StoreError, match="LOOKUP_COLLECTION"):
        indexing.ingest(store, corpus, Embedder(other_name))
    assert store.count_chunks() == chunks  # nothing was lost


def test_a_collection_made_before_the_model_was_recorded_is_rebuilt_once(store, embedder):
    corpus = Corpus("mem", (make_entry("a/One", "ops", "Disk is full on the node."),))
    store.client.collections.create(store.name)  # no description: which model's vectors is unknown
    assert store.stored_model() is None
    report = indexing.ingest(store, corpus, embedder)
    assert report.schema_rebuilt and store.stored_model() == embedder.spec.name
    assert not indexing.ingest(store, corpus, embedder).schema_rebuilt


# --- vector compression (LOOKUP_VECTOR_COMPRESSION) ---------------------------------------------------------
def test_a_new_collection_is_made_with_the_compression_asked_for(store):
    from retrieval.config import DEFAULT_VECTOR_COMPRESSION

    assert KnowledgeStore(store.client, store.name, vector_compression="rq").ensure_collection() is None
    assert store.compression() == "rq"
    store.drop()
    assert KnowledgeStore(store.client, store.name, vector_compression="none").ensure_collection() is None
    assert store.compression() == "none"
    store.drop()
    store.ensure_collection()  # no compression asked for: the default
    assert store.compression() == DEFAULT_VECTOR_COMPRESSION


def test_an_uncompressed_collection_is_compressed_in_place_with_a_message(store, embedder):
    a = make_entry("x/A", "x", "alpha text about disks")
    plain = KnowledgeStore(store.client, store.name, vector_compression="none")
    indexing.ingest(plain, Corpus("mem", (a,)), embedder)
    assert store.compression() == "none"
    assert plain.ensure_collection() is None  # a store that asks for none leaves it as it is
    rq = KnowledgeStore(store.client, store.name, vector_compression="rq")
    report = indexing.ingest(rq, Corpus("mem", (a,)), embedder)
    assert report.settings_migrated is not None and "vector compression none -> rq" in report.settings_migrated
    assert store.compression() == "rq" and report.unchanged == 1  # in place: nothing embedded again
    hits = rq.search(SearchRequest(NV, 5, embedder.embed_query("alpha disks")))
    assert [h.entry_id for h in hits] == ["x/A"]
    assert rq.ensure_collection() is None  # done once


@pytest.mark.parametrize("want", ["bq", "none"])
def test_a_compressed_collection_asked_for_another_compression_must_be_rebuilt(store, want):
    from retrieval.errors import StoreError

    KnowledgeStore(store.client, store.name, vector_compression="rq").ensure_collection()
    other = KnowledgeStore(store.client, store.name, vector_compression=want)
    with pytest.raises(StoreError, match=rf"rq compression.*asks for {want}.*ingest --rebuild.*LOOKUP_VECTOR_COMPRESSION=rq"):
        other.ensure_collection()
    assert store.compression() == "rq"  # left as it was


def test_a_compression_weaviate_does_not_offer_is_refused_naming_the_variable(weaviate_client):
    from retrieval.errors import ConfigError

    with pytest.raises(ConfigError, match=r"LOOKUP_VECTOR_COMPRESSION.*'zstd'.*none, rq, pq, bq, sq"):
        KnowledgeStore(weaviate_client, "TNeverMade", vector_compression="zstd")
