"""Whether the vector index of a knowledge collection can find what it stores: a Weaviate 1.38 killed before it wrote
out its HNSW commit log keeps the objects, but vector search misses some, and storing them again does not index them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from weaviate.classes.query import Filter

if TYPE_CHECKING:
    from retrieval.store.weaviate_store import KnowledgeStore

PARALLEL_CHECKS = 4  # batch queries in flight at once


def missing_vectors(store: KnowledgeStore, sample: int = 32) -> int:
    """How many of up to `sample` stored chunks the vector index cannot find by their own vector (each check exact:
    filtered to the one chunk); not 0 after the server was killed before it wrote out its HNSW commit log."""
    if not store.client.collections.exists(store.name):
        return 0
    found = store.collection.query.fetch_objects(limit=sample, include_vector=True, return_properties=["entry_id", "chunk_index"])
    missing = 0
    for obj in found.objects:
        vector = obj.vector.get("default") if isinstance(obj.vector, dict) else None
        where = Filter.by_property("entry_id").equal(obj.properties["entry_id"]) & Filter.by_property("chunk_index").equal(
            int(obj.properties["chunk_index"])
        )
        hits = store.collection.query.near_vector(near_vector=vector, limit=1, filters=where).objects if vector else []
        missing += not hits or hits[0].uuid != obj.uuid
    return missing


def unsearchable_chunks(
    store: KnowledgeStore, *, chunks: dict[str, list[str]] | None = None, batch_chunks: int | None = None
) -> dict[str, int]:
    """entry_id -> how many of its stored chunks the vector index cannot find (`chunks`: entry_id -> chunk uuids, else read
    from the server). One near_vector query per batch of entries, kept below flatSearchCutoff so that the filtered
    search is exact: it compares every allowed object that has a vector in the index."""
    if not store.client.collections.exists(store.name):
        return {}
    if chunks is None:
        chunks = {}
        for obj in store.collection.iterator(return_properties=["entry_id"]):
            chunks.setdefault(obj.properties["entry_id"], []).append(str(obj.uuid))
    if not chunks:
        return {}
    if batch_chunks is None:
        batch_chunks = min(2000, store.filter_settings()[1] - 1)
    first = store.collection.query.fetch_objects(limit=1, include_vector=True).objects
    probe = first[0].vector.get("default") if first and isinstance(first[0].vector, dict) else None
    if probe is None:  # no object with a vector: none can be found
        return {e: len(u) for e, u in chunks.items()}
    lost: dict[str, int] = {}
    batches: list[list[str]] = [[]]
    size = 0
    for entry_id in sorted(chunks):
        if batches[-1] and size + len(chunks[entry_id]) > batch_chunks:
            batches.append([])
            size = 0
        batches[-1].append(entry_id)
        size += len(chunks[entry_id])

    def check(batch: list[str]) -> dict[str, int]:
        where = Filter.by_property("entry_id").contains_any(batch)
        limit = sum(len(chunks[e]) for e in batch)
        hits = store.collection.query.near_vector(near_vector=probe, limit=limit, filters=where, return_properties=[]).objects
        found = {str(o.uuid) for o in hits}
        return {e: n for e in batch if (n := sum(u not in found for u in chunks[e]))}

    # a few at a time: a 100k-entry collection takes about 500 batches, and the server answers them in parallel
    with ThreadPoolExecutor(max_workers=PARALLEL_CHECKS) as pool:
        for part in pool.map(check, batches):
            lost.update(part)
    return lost
