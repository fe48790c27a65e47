"""The ingest's manifest: entry id -> content hash and chunk count, in a small collection beside the knowledge
collection, so re-ingesting an unchanged corpus reads no chunk back. Dropped before an ingest changes anything and
trusted only while the collection holds exactly the chunks it lists.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import TYPE_CHECKING, Any

from weaviate.classes.config import DataType, Property
from weaviate.classes.data import DataObject
from weaviate.util import generate_uuid5

from retrieval.store.collection_names import MANIFEST_SUFFIX

if TYPE_CHECKING:
    from retrieval.store.weaviate_store import KnowledgeStore

PART_CHARS = 1_000_000  # characters of the compressed manifest per object


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float | str) else -1


def manifest_name(store: KnowledgeStore) -> str:
    return store.name + MANIFEST_SUFFIX


def read_manifest(store: KnowledgeStore) -> dict[str, tuple[str, int]] | None:
    """entry_id -> (content hash, chunk count) as the last complete ingest stored them, or None when there is
    no manifest or the collection no longer holds exactly the chunks it lists."""
    name = manifest_name(store)
    if not store.client.collections.exists(name):
        return None
    parts = {
        _int(o.properties["part"]): (str(o.properties["data"]), _int(o.properties["parts"]), _int(o.properties["chunks"]))
        for o in store.client.collections.use(name).iterator(return_properties=["part", "parts", "chunks", "data"])
    }
    if not parts:
        return None
    _, count, chunks = next(iter(parts.values()))
    if sorted(parts) != list(range(count)) or chunks != store.count_chunks():
        return None  # a part is missing, or chunks were added or removed since
    try:
        raw = json.loads(zlib.decompress(base64.b64decode("".join(parts[i][0] for i in range(count)))))
    except (ValueError, zlib.error):
        return None
    state = {str(k): (str(v[0]), int(v[1])) for k, v in raw.items()}
    return state if sum(n for _, n in state.values()) == chunks else None


def drop_manifest(store: KnowledgeStore) -> None:
    if store.client.collections.exists(manifest_name(store)):
        store.client.collections.delete(manifest_name(store))


def write_manifest(store: KnowledgeStore, state: dict[str, tuple[str, int]]) -> None:
    """Replace the manifest with `state` (entry_id -> (content hash, chunk count)), of the collection as it is now."""
    drop_manifest(store)
    name = manifest_name(store)
    store.client.collections.create(
        name,
        properties=[
            Property(name="part", data_type=DataType.INT),
            Property(name="parts", data_type=DataType.INT),
            Property(name="chunks", data_type=DataType.INT),
            Property(name="data", data_type=DataType.TEXT, index_filterable=False, index_searchable=False),
        ],
    )
    data = base64.b64encode(zlib.compress(json.dumps(state, separators=(",", ":")).encode("utf-8"), 6)).decode("ascii")
    pieces = [data[i : i + PART_CHARS] for i in range(0, len(data), PART_CHARS)] or [""]
    chunks = sum(n for _, n in state.values())
    objects: list[Any] = [
        DataObject(
            properties={"part": i, "parts": len(pieces), "chunks": chunks, "data": piece},
            uuid=generate_uuid5(f"{name}#{i}"),
        )
        for i, piece in enumerate(pieces)
    ]
    res = store.client.collections.use(name).data.insert_many(objects)
    if res.has_errors:  # no manifest is safe (the next ingest reads the chunks); a wrong one is not
        drop_manifest(store)
