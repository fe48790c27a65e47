"""retrieval.store.indexing: ingest into a collection of the real embedded Weaviate of the test session. The
check at consistency ALL is in test_replicas, the repair of chunks the index lost in test_faults_index."""

from __future__ import annotations

import pytest
from weaviate.classes.config import Reconfigure

from retrieval.core.chunking import stored_hash
from retrieval.core.corpus import Corpus
from retrieval.core.search_request import SearchRequest
from retrieval.store import indexing
from retrieval.store.manifest import read_manifest
from retrieval.types.modes import SearchMode

from ..helpers.entries import make_entry

NV = SearchMode.NEAR_VECTOR


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
    hit = store.search(SearchRequest(NV, 1, embedder.embed_query("beta text, now changed")))[0]
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
    assert store.search(SearchRequest(SearchMode.BM25, 1, embedder.embed_query("alpha"), text="alpha"))[0].entry_id == "x/A"


# --- the manifest: re-ingest without reading every chunk back ------------------------------------------------
def _no_read_back(store):
    """Fail if the ingest reads the collection's state back from the chunks (the path without a manifest)."""

    def read_back():
        raise AssertionError("indexed_state read every chunk although the manifest was valid")

    store.indexed_state = read_back


def test_reingest_of_an_unchanged_corpus_reads_the_manifest_not_the_chunks(store, embedder):
    a, b = make_entry("x/A", "x", "alpha text"), make_entry("x/B", "x", "beta text")
    indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    assert read_manifest(store) == {"x/A": (stored_hash(a), 2), "x/B": (stored_hash(b), 2)}
    _no_read_back(store)
    again = indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    assert (again.unchanged, again.chunks_embedded, again.repaired_index) == (2, 0, False)


def test_the_manifest_notices_added_changed_and_removed_entries(store, embedder):
    a, b = make_entry("x/A", "x", "alpha text"), make_entry("x/B", "x", "beta text")
    indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    _no_read_back(store)
    b2, c = make_entry("x/B", "x", "beta text, now changed"), make_entry("y/C", "y", "gamma")
    changed = indexing.ingest(store, Corpus("mem", (b2, c)), embedder)
    assert (changed.added, changed.updated, changed.unchanged, changed.removed) == (1, 1, 0, 1)
    assert read_manifest(store) == {"x/B": (stored_hash(b2), 2), "y/C": (stored_hash(c), 2)}
    assert store.count_chunks() == 4
    assert indexing.ingest(store, Corpus("mem", (b2, c)), embedder).unchanged == 2


def test_chunks_removed_behind_the_ingest_s_back_void_the_manifest(store, embedder):
    long = make_entry("ops/Long", "ops", " ".join(f"line {i} of a long runbook body." for i in range(200)))
    indexing.ingest(store, Corpus("mem", (long,)), embedder)
    total = store.count_chunks()
    store.collection.data.delete_by_id(next(iter(store.collection.iterator())).uuid)  # a crash, or a hand
    assert read_manifest(store) is None  # the collection no longer holds what it lists
    report = indexing.ingest(store, Corpus("mem", (long,)), embedder)
    assert report.updated == 1 and store.count_chunks() == total
    assert read_manifest(store) == {"ops/Long": (stored_hash(long), total)}


def test_an_ingest_that_fails_midway_leaves_no_manifest(store, embedder):
    a, b = make_entry("x/A", "x", "alpha text"), make_entry("x/B", "x", "beta text")
    indexing.ingest(store, Corpus("mem", (a,)), embedder)
    assert read_manifest(store) is not None

    class Broken:
        tokenizer, max_tokens = embedder.tokenizer, embedder.max_tokens

        def embed(self, texts):
            raise RuntimeError("the model died")

    with pytest.raises(RuntimeError, match="the model died"):
        indexing.ingest(store, Corpus("mem", (a, b)), Broken())
    assert read_manifest(store) is None
    report = indexing.ingest(store, Corpus("mem", (a, b)), embedder)
    assert (report.added, report.unchanged) == (1, 1) and read_manifest(store) is not None


def test_an_existing_collection_with_other_filter_settings_is_migrated(store, embedder):
    from weaviate.classes.config import VectorFilterStrategy

    from retrieval.store.collection_schema import FILTER_STRATEGY, FLAT_SEARCH_CUTOFF

    a = make_entry("x/A", "x", "alpha text")
    indexing.ingest(store, Corpus("mem", (a,)), embedder)
    assert store.filter_settings() == (FILTER_STRATEGY, FLAT_SEARCH_CUTOFF)
    store.drop()
    store.ensure_collection(embedder.spec.name)  # made as before, then given Weaviate's defaults by hand
    store.collection.config.update(
        vector_config=Reconfigure.Vectors.update(
            name="default",
            vector_index_config=Reconfigure.VectorIndex.hnsw(
                filter_strategy=VectorFilterStrategy.SWEEPING, flat_search_cutoff=40_000
            ),
        )
    )
    assert store.filter_settings() == ("sweeping", 40_000)
    report = indexing.ingest(store, Corpus("mem", (a,)), embedder)
    assert report.settings_migrated is not None
    assert "filter strategy sweeping -> acorn" in report.settings_migrated and "40,000 -> 1,000" in report.settings_migrated
    assert store.filter_settings() == (FILTER_STRATEGY, FLAT_SEARCH_CUTOFF) and report.added == 1
    assert indexing.ingest(store, Corpus("mem", (a,)), embedder).settings_migrated is None


def test_a_manifest_in_several_parts_reads_back_and_a_lost_part_voids_it(store, embedder, monkeypatch):
    from retrieval.store import manifest

    entries = tuple(make_entry(f"x/E{i}", "x", f"text number {i}") for i in range(12))
    monkeypatch.setattr(manifest, "PART_CHARS", 64)
    indexing.ingest(store, Corpus("mem", entries), embedder)
    parts = store.client.collections.use(manifest.manifest_name(store))
    assert parts.aggregate.over_all(total_count=True).total_count > 2
    assert read_manifest(store) == {e.entry_id: (stored_hash(e), 2) for e in entries}
    parts.data.delete_by_id(next(iter(parts.iterator())).uuid)
    assert read_manifest(store) is None  # never half a manifest: the ingest reads the chunks instead
    assert indexing.ingest(store, Corpus("mem", entries), embedder).unchanged == 12
    assert read_manifest(store) == {e.entry_id: (stored_hash(e), 2) for e in entries}  # and writes it whole again
