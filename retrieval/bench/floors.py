"""The floors the bench holds the ingest against, measured in the same run on the same chunks: Weaviate's own bare
`insert_many` of the stored chunks into a plain collection, and the model's best onnxruntime throughput on a sample.
A quantized model's batches are shown but are no floor: their vectors depend on the texts beside them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from weaviate.classes.data import DataObject

from retrieval.store.collection_schema import PROPERTIES
from retrieval.store.embedding import Embedder, ingest_workers
from retrieval.store.indexing import INSERT_SLICE  # objects per insert_many call: the floor's as the ingest's own
from retrieval.store.weaviate_store import KnowledgeStore

BATCH = 8  # texts per length-bucketed batch: of 8, 16 and 32 here the fastest for bge-small int8 (132 against 116 texts/s at 32)


def ingest_floor(store: KnowledgeStore, floor_name: str) -> dict[str, Any]:
    """Objects per second of a bare insert of the collection's chunks into a plain collection `floor_name` (made
    with the store's vector index settings, dropped afterwards)."""
    client = store.client
    if client.collections.exists(floor_name):
        client.collections.delete(floor_name)
    store.create_collection(floor_name)
    target = client.collections.use(floor_name)
    insert_s, objects = 0.0, 0
    try:
        batch: list[DataObject[Any, Any]] = []

        def insert() -> None:
            nonlocal insert_s, objects
            t0 = time.perf_counter()
            res = target.data.insert_many(batch)
            insert_s += time.perf_counter() - t0
            if res.has_errors:
                raise RuntimeError(f"the floor's insert was refused: {next(iter(res.errors.values())).message}")
            objects += len(batch)
            batch.clear()

        for obj in store.collection.iterator(include_vector=True, return_properties=list(PROPERTIES)):
            vector = obj.vector.get("default") if isinstance(obj.vector, dict) else obj.vector
            batch.append(DataObject(properties=obj.properties, uuid=obj.uuid, vector=vector))
            if len(batch) >= INSERT_SLICE:
                insert()
        if batch:
            insert()
    finally:
        client.collections.delete(floor_name)
    return {
        "objects": objects,
        "insert_s": round(insert_s, 2),
        "objects_per_s": round(objects / insert_s, 1) if insert_s else None,
        "how": f"insert_many of {INSERT_SLICE}, sequential, into a plain collection",
    }


def embedding_floor(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    """Chunks per second of each way to run the model on `texts` (passages), the best of them, and which it is."""
    prefix = embedder.spec.passage_prefix
    workers = ingest_workers()
    ways: dict[str, float] = {}

    def rate(run) -> float:
        t0 = time.perf_counter()
        run()
        return round(len(texts) / (time.perf_counter() - t0), 2)

    def one_session() -> None:
        for text in texts:
            embedder._run([prefix + text], batch=True)

    ways["one text per call, one session"] = rate(one_session)
    embedder.embed_each(texts[:workers], workers=workers)  # its sessions opened before the clock starts, as the ingest's are
    ways[f"one text per call, {workers} single-threaded sessions side by side"] = rate(
        lambda: embedder.embed_each(texts, workers=workers)
    )
    ordered = sorted(texts, key=len)

    def bucketed() -> None:
        for start in range(0, len(ordered), BATCH):
            embedder._run([prefix + t for t in ordered[start : start + BATCH]], batch=True)

    batched = rate(bucketed)
    out: dict[str, Any] = {"texts": len(texts), "ways": ways}
    if embedder.spec.quantized:  # measured, shown, and not a floor: its vectors would depend on their batch
        out["batched_not_usable"] = {f"length-bucketed batches of {BATCH}, one session": batched}
    else:
        ways[f"length-bucketed batches of {BATCH}, one session"] = batched
    best = max(ways, key=lambda k: ways[k])
    return {**out, "best": best, "chunks_per_s": ways[best]}
