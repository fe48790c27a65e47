"""The per-domain partition (retrieval.store.partition) against the real embedded Weaviate of the test session."""

from __future__ import annotations

import re

import pytest

from retrieval.core.corpus import Corpus
from retrieval.core.search_request import SearchRequest
from retrieval.store import indexing, partition
from retrieval.store.partition import partition_name, tenant_for
from retrieval.types.modes import SearchMode

from ..helpers.entries import make_entry

NV = SearchMode.NEAR_VECTOR


@pytest.mark.parametrize(
    ("domain", "kept"),
    [("storage", True), ("Not Verified", False), ("a.b", False), ("x" * 64, True), ("x" * 65, False), ("", False)],
)
def test_a_tenant_name_is_the_domain_when_weaviate_allows_it_else_safe_and_distinct(domain, kept):
    tenant = tenant_for(domain)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tenant)
    assert (tenant == domain) is kept
    assert tenant_for(domain) == tenant  # stable across calls and processes (no salted hash)


def test_domains_that_differ_only_in_unsafe_characters_get_distinct_tenants():
    names = ["Not Verified", "Not.Verified", "Not/Verified", "Not_Verified", "x" * 65, "x" * 66]
    assert len({tenant_for(n) for n in names}) == len(names)


def _corpus(*entries):
    return Corpus("mem", tuple(entries))


def _ids(store, vec, category=None, k=10):
    return {c.entry_id for c in store.search(SearchRequest(NV, k, vec, category=category))}


def test_ingest_keeps_one_tenant_per_domain_in_step_and_filtered_search_uses_it(store, embedder):
    a1 = make_entry("net/A", "network", "packets dropped on the bridge interface")
    a2 = make_entry("net/B", "network", "dns lookups time out")
    b1 = make_entry("st/C", "Not Verified", "the volume is full")
    report = indexing.ingest(store, _corpus(a1, a2, b1), embedder)
    assert report.settings_migrated is None  # a new collection: both written as it goes, nothing to rebuild
    counts = partition.tenant_counts(store)  # chunks: each entry here is a card and one section
    assert counts == {"network": 4, tenant_for("Not Verified"): 2} == partition.domain_counts(store)
    assert partition.is_in_step(store)
    vec = embedder.embed_query("network packets")
    assert store.tenant_of("network") is not None
    assert _ids(store, vec, "network") == {"net/A", "net/B"}
    assert _ids(store, vec, "Not Verified") == {"st/C"}
    store.partitioned = False  # the where-filter gives the same entries
    assert _ids(store, vec, "network") == {"net/A", "net/B"}
    store.partitioned = True
    # a domain the partition has no tenant for: nothing, as the where-filter says
    assert _ids(store, vec, "nothing-here") == set()


def test_changed_and_removed_entries_leave_the_partition_too(store, embedder):
    a = make_entry("net/A", "network", "packets dropped")
    b = make_entry("net/B", "network", "dns lookups time out")
    indexing.ingest(store, _corpus(a, b), embedder)
    moved = make_entry("net/A", "storage", "packets dropped, now filed under storage")
    indexing.ingest(store, _corpus(moved), embedder)
    assert partition.tenant_counts(store) == {"storage": 2}
    vec = embedder.embed_query("packets dropped")
    assert _ids(store, vec, "network") == set()
    assert _ids(store, vec, "storage") == {"net/A"}


def test_a_collection_without_a_partition_gets_one_copied_with_a_message_and_nothing_embedded(store, embedder):
    entries = [make_entry(f"d{i % 3}/E{i}", f"d{i % 3}", f"entry number {i} about topic {i % 3}") for i in range(9)]
    indexing.ingest(store, _corpus(*entries), embedder)
    store.client.collections.delete(partition_name(store.name))  # as an older version left it
    store.forget_partition()
    vec = embedder.embed_query("topic 1")
    assert store.tenant_of("d1") is None  # no partition: the where-filter serves
    assert _ids(store, vec, "d1") == {"d1/E1", "d1/E4", "d1/E7"}
    report = indexing.ingest(store, _corpus(*entries), embedder)
    assert report.chunks_embedded == 0 and report.unchanged == 9
    assert report.settings_migrated is not None and "per-domain partition" in report.settings_migrated
    assert "18 chunks copied" in report.settings_migrated
    assert partition.tenant_counts(store) == {"d0": 6, "d1": 6, "d2": 6}
    assert store.tenant_of("d1") is not None and _ids(store, vec, "d1") == {"d1/E1", "d1/E4", "d1/E7"}
    assert indexing.ingest(store, _corpus(*entries), embedder).settings_migrated is None


def test_a_partition_out_of_step_is_not_searched_and_the_next_ingest_rebuilds_it(store, embedder):
    a = make_entry("net/A", "network", "packets dropped")
    b = make_entry("net/B", "network", "dns lookups time out")
    indexing.ingest(store, _corpus(a, b), embedder)
    partition.delete_entries(store, ["net/B"])  # the partition lost an entry behind the ingest's back
    assert not partition.in_step(store)
    report = indexing.ingest(store, _corpus(a, b), embedder)
    assert "was out of step" in (report.settings_migrated or "")
    assert partition.tenant_counts(store) == {"network": 4}


def test_while_an_ingest_changes_the_collection_searches_use_the_where_filter(store, embedder, monkeypatch):
    a = make_entry("net/A", "network", "packets dropped")
    indexing.ingest(store, _corpus(a), embedder)
    seen = []

    def fail_after_marking(*args, **kwargs):
        seen.append(partition.is_in_step(store))
        raise RuntimeError("stopped midway")

    monkeypatch.setattr(indexing, "_insert", fail_after_marking)
    with pytest.raises(RuntimeError):
        indexing.ingest(store, _corpus(a, make_entry("net/B", "network", "dns")), embedder)
    assert seen == [False]
    store.forget_partition()
    assert store.tenant_of("network") is None


def test_the_writer_writes_a_tenant_once_it_fills_and_the_rest_on_flush(store, embedder, monkeypatch):
    from weaviate.classes.data import DataObject
    from weaviate.util import generate_uuid5

    monkeypatch.setattr(partition, "WRITE_SLICE", 3)
    store.ensure_collection()
    partition.ensure_partition(store)
    vec = [float(x) for x in embedder.embed_query("disk full")]

    def chunk(domain: str, i: int) -> DataObject:
        props = {"entry_id": f"{domain}/E{i}", "chunk_index": 0, "chunk_count": 1, "category": domain, "text": "t", "title": "t"}
        return DataObject(properties=props, uuid=generate_uuid5(f"{domain}/E{i}#0"), vector=vec)

    writer = partition.PartitionWriter(store)
    writer.add([chunk("a", 0), chunk("a", 1), chunk("b", 0)])
    assert partition.tenant_counts(store) == {}  # no tenant full yet: nothing written
    writer.add([chunk("a", 2), chunk("b", 1)])
    assert partition.tenant_counts(store) == {"a": 3}  # "a" filled: written whole
    writer.flush()
    assert partition.tenant_counts(store) == {"a": 3, "b": 2}
    writer.flush()  # nothing left: a second flush writes nothing again
    assert partition.tenant_counts(store) == {"a": 3, "b": 2}


@pytest.mark.parametrize(
    ("earlier", "graph"),
    [({}, (128, 32)), ({"ef_construction": partition.EF_CONSTRUCTION}, (partition.EF_CONSTRUCTION, 32))],
    ids=["weaviate-defaults", "32-links"],
)
def test_a_partition_built_with_other_graph_settings_is_made_again_and_copied(store, embedder, earlier, graph):
    a = make_entry("net/A", "network", "packets dropped")
    b = make_entry("st/C", "storage", "the volume is full")
    indexing.ingest(store, _corpus(a, b), embedder)
    assert partition.graph_settings(store) == partition.GRAPH
    # a partition as an earlier version made it, in step with the collection
    store.client.collections.delete(partition_name(store.name))
    store.create_collection(
        partition_name(store.name),
        description=partition.description_of(store.name, partition.IN_STEP),
        per_tenant=True,
        **earlier,
    )
    partition.write(store, partition.as_objects(list(store.collection.iterator(include_vector=True))))
    assert partition.graph_settings(store) == graph and partition.in_step(store)
    report = indexing.ingest(store, _corpus(a, b), embedder)  # nothing changed in the collection
    assert report.chunks_embedded == 0 and partition.graph_settings(store) == partition.GRAPH
    assert "was out of step" in (report.settings_migrated or "") and "4 chunks copied" in report.settings_migrated
    assert partition.tenant_counts(store) == {"network": 2, "storage": 2} and partition.is_in_step(store)
    assert indexing.ingest(store, _corpus(a, b), embedder).settings_migrated is None  # made once, then kept


def test_a_partition_that_cannot_be_searched_leaves_the_search_to_the_where_filter(store, embedder):
    """What a restarted server does before it has loaded the partition ("tried to browse non-existing index", "could
    not find class"): here the partition's collection is dropped for real behind the store's back, after the store
    read it in step. The filtered search answers from the collection with the where-filter, and the partition's state
    is read again."""
    a = make_entry("net/A", "network", "packets dropped on the bridge interface")
    b = make_entry("net/B", "network", "dns lookups time out")
    indexing.ingest(store, _corpus(a, b), embedder)
    vec = embedder.embed_query("network packets")
    assert store.tenant_of("network") is not None  # read in step, and kept for the next searches
    store.client.collections.delete(partition_name(store.name))
    assert _ids(store, vec, "network") == {"net/A", "net/B"}
    assert store.tenant_of("network") is None  # read again: no partition, the filter until the next ingest
