"""retrieval.indexing: ingest into a collection of the real embedded Weaviate of the test session. The
check at consistency ALL is in test_replicas, the repair of chunks the index lost in test_faults_index."""

from __future__ import annotations

from retrieval import indexing
from retrieval.corpus import Corpus

from .test_weaviate_store import make_entry


def test_ingest_is_incremental_and_removes_stale_entries(store, embedder):
    a, b = make_entry("x/A", "x", "alpha text"), make_entry("x/B", "x", "beta text")
    first = indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    assert (first.added, first.unchanged, first.chunks_embedded) == (2, 0, 4)  # a card and one section each
    again = indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    assert (again.added, again.updated, again.unchanged, again.chunks_embedded) == (0, 0, 2, 0)
    b2 = make_entry("x/B", "x", "beta text, now changed")
    c = make_entry("y/C", "y", "gamma")
    changed = indexing.ingest(store, Corpus("mem", (b2, c)), embedder)
    assert (changed.added, changed.updated, changed.unchanged, changed.removed, changed.chunks_embedded) == (1, 1, 0, 1, 4)
    assert store.indexed_entry_ids() == {"x/B", "y/C"}
    assert store.count_chunks() == 4
    hit = store.search(embedder.embed_query("beta text, now changed"), k=1)[0]
    assert hit.entry_id == "x/B" and "now changed" in hit.snippet


def test_ingest_resumes_after_an_interrupted_entry(store, embedder):
    filler = " ".join(f"line {i} of a long runbook body." for i in range(200))
    long = make_entry("ops/Long", "ops", filler)
    indexing.ingest(store, Corpus("mem", (long,)), embedder)
    total = store.count_chunks()
    # Simulate a crash midway through the entry's chunks: remove one chunk on the server.
    first = next(iter(store.collection.iterator()))
    store.collection.data.delete_by_id(first.uuid)
    assert store.indexed_state()["ops/Long"][1] == total - 1
    report = indexing.ingest(store, Corpus("mem", (long,)), embedder)
    assert report.updated == 1 and store.count_chunks() == total  # redone, without duplicates


def test_a_collection_of_an_older_version_is_rebuilt(store, embedder):
    from weaviate.classes.config import Configure, DataType, Property

    store.client.collections.create(
        store.name,
        vector_config=Configure.Vectors.self_provided(),
        properties=[Property(name="entry_id", data_type=DataType.TEXT)],
    )
    assert not store.schema_current()
    report = indexing.ingest(store, Corpus("mem", (make_entry("x/A", "x", "alpha"),)), embedder)
    assert report.schema_rebuilt and report.added == 1 and store.schema_current()
    assert store.search(embedder.embed_query("alpha"), k=1, mode="bm25", query_text="alpha")[0].entry_id == "x/A"
