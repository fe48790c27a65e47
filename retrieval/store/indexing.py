"""Ingest: bring a knowledge collection in line with a corpus, embedding only what changed.
Entries are chunked, embedded and stored with their own vectors; unchanged entries are skipped by content hash (the
`manifest`, else the chunks' hashes), entries whose vectors the index lost are stored again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter
from weaviate.util import generate_uuid5

from retrieval.core.chunking import Chunk, chunk_entry, heading_words, stored_hash
from retrieval.core.corpus import Corpus, Entry
from retrieval.errors import L1Error, StoreError
from retrieval.store import partition
from retrieval.store.collection_model import model_in, other_model_message
from retrieval.store.collection_names import refuse_clashes
from retrieval.store.collection_schema import PROPERTIES
from retrieval.store.index_health import unsearchable_chunks
from retrieval.store.manifest import drop_manifest, read_manifest, write_manifest
from retrieval.store.replicas import shortfall

if TYPE_CHECKING:
    from retrieval.store.weaviate_store import KnowledgeStore

INSERT_SLICE = 500  # chunks per insert_many call


@dataclass(frozen=True)
class IngestReport:
    entries_total: int
    added: int
    updated: int
    unchanged: int
    removed: int
    chunks_embedded: int
    seconds: float
    embed_seconds: float
    repaired_index: bool = False  # the vector index had lost chunks: the collection was rebuilt
    schema_rebuilt: bool = False  # made by an older version (other fields, or no model recorded): rebuilt
    # what was changed on an existing collection (filter settings, compression, its per-domain partition rebuilt)
    settings_migrated: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def ingest(
    store: KnowledgeStore,
    corpus: Corpus,
    embedder,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    batch_entries: int = 64,
) -> IngestReport:
    """Bring the collection in line with `corpus`; unchanged entries are not embedded again. `progress(stage, done, total)`
    is called as work goes. The next ingest redoes entries left incomplete by a crash, and those the vector index lost."""
    start = time.perf_counter()
    refuse_clashes(store.client, store.name)  # before anything is written
    rebuilt, migrated = _prepare_collection(store, getattr(getattr(embedder, "spec", None), "name", None))
    manifest = read_manifest(store)
    state, lost = _stored_state(store, manifest)
    plan = _plan(corpus, state, lost)
    if plan.stale or plan.todo:
        require_replicas(store)
        drop_manifest(store)  # from here until it is written again, the next ingest reads the chunks back
        partition.mark(store, partition.BUILDING)  # and searches use the where-filter
    for i in range(0, len(plan.stale), 200):
        ids = plan.stale[i : i + 200]
        store.collection.data.delete_many(where=Filter.by_property("entry_id").contains_any(ids))
    partition.delete_entries(store, plan.stale)
    redone = {e.entry_id for e in plan.todo}
    stored = {e.entry_id: (state[e.entry_id][0], state[e.entry_id][2]) for e in corpus.entries if e.entry_id not in redone}
    chunks_done, embed_seconds = _embed_and_store(store, plan.todo, embedder, stored, progress, batch_entries)
    if manifest is None or plan.stale or plan.todo:
        write_manifest(store, stored)
    migrated = "; ".join(m for m in (migrated, sync_partition(store, repaired=bool(lost))) if m) or None
    return IngestReport(
        len(corpus.entries),
        plan.added,
        plan.updated,
        plan.unchanged,
        plan.removed,
        chunks_done,
        time.perf_counter() - start,
        embed_seconds,
        bool(lost),
        rebuilt,
        migrated,
    )


def _prepare_collection(store: KnowledgeStore, model: str | None) -> tuple[bool, str | None]:
    """The collection ready for `model` (None: vectors that are not a model's): refused when it holds another model's,
    rebuilt when made by an older version. Returns (rebuilt, what was migrated)."""
    # One look at the collection (None: there is none) tells both its model and whether its fields are current.
    config = store.collection.config.get() if store.client.collections.exists(store.name) else None
    stored_model = model_in(config.description) if model and config is not None else None
    if model and stored_model is not None and stored_model != model:
        raise StoreError(other_model_message(store.name, stored_model, model))
    old_fields = config is not None and not set(PROPERTIES) <= {p.name for p in config.properties}
    # A collection made before the model was recorded may hold any model's vectors: it is rebuilt once.
    rebuilt = old_fields or bool(model and config is not None and stored_model is None)
    if rebuilt:
        store.drop()
    migrated = store.ensure_collection(model)
    partition.ensure_partition(store)
    return rebuilt, migrated


def _stored_state(
    store: KnowledgeStore, manifest: dict[str, tuple[str, int]] | None
) -> tuple[dict[str, tuple[str, int, int]], dict[str, Any]]:
    """What the collection holds (entry id -> content hash, chunk count, chunks stored) and the chunks it lost."""
    if manifest is not None:  # what the last ingest stored, while the collection still holds exactly that
        state = {entry_id: (h, n, n) for entry_id, (h, n) in manifest.items()}
        uuids = {entry_id: [str(generate_uuid5(f"{entry_id}#{i}")) for i in range(n)] for entry_id, (_, n) in manifest.items()}
        return state, (unsearchable_chunks(store, chunks=uuids) if state else {})
    state = store.indexed_state()
    return state, (unsearchable_chunks(store) if state else {})


@dataclass(frozen=True)
class _Plan:
    todo: list[Entry]
    stale: list[str]
    added: int
    updated: int
    unchanged: int
    removed: int


def _plan(corpus: Corpus, state: dict[str, tuple[str, int, int]], lost: dict[str, Any]) -> _Plan:
    """Which entries to embed (new, changed, incomplete or lost), which to delete, and how many of each kind."""
    wanted = {e.entry_id for e in corpus.entries}
    todo: list[Entry] = []
    added = updated = unchanged = 0
    for entry in corpus.entries:
        have = state.get(entry.entry_id)
        if have and have[0] == stored_hash(entry) and have[1] == have[2] and not lost.get(entry.entry_id):
            unchanged += 1
            continue
        todo.append(entry)
        if have:
            updated += 1
        else:
            added += 1
    stale = sorted(set(state) - wanted) + [e.entry_id for e in todo if e.entry_id in state]
    return _Plan(todo, stale, added, updated, unchanged, len(set(state) - wanted))


def _embed_and_store(
    store: KnowledgeStore,
    todo: Sequence[Entry],
    embedder: Any,
    stored: dict[str, tuple[str, int]],
    progress: Callable[[str, int, int], None] | None,
    batch_entries: int,
) -> tuple[int, float]:
    """Chunk, embed and insert `todo` a batch at a time, noting each entry in `stored`. Returns (chunks, embed seconds)."""
    embed_seconds = 0.0
    chunks_done = 0
    total = len(todo)
    if progress:
        progress("embedding", 0, total)
    to_partition = partition.PartitionWriter(store)
    for i in range(0, total, batch_entries):
        batch = todo[i : i + batch_entries]
        chunks = [c for e in batch for c in chunk_entry(e, embedder.tokenizer, embedder.max_tokens)]
        t0 = time.perf_counter()
        vectors = embedder.embed([c.text for c in chunks])
        embed_seconds += time.perf_counter() - t0
        _insert(store, batch, chunks, vectors, to_partition)
        chunks_done += len(chunks)
        stored.update({e.entry_id: (stored_hash(e), sum(c.entry_id == e.entry_id for c in chunks)) for e in batch})
        if progress:
            progress("embedding", min(i + batch_entries, total), total)
    to_partition.flush()
    return chunks_done, embed_seconds


def sync_partition(store: KnowledgeStore, *, repaired: bool = False) -> str | None:
    """Mark the per-domain partition in step when every domain holds as many chunks in it as in the collection;
    else, or when the collection's vector index had lost chunks (`repaired`: the partition's likely did too), copy
    the collection's chunks into a new one. Returns what was done for the caller to say, or None."""
    if not repaired and partition.in_step(store):
        partition.mark(store, partition.IN_STEP)
        return None
    t0 = time.perf_counter()
    copied = partition.rebuild(store)
    why = "had lost chunks" if repaired else "was out of step (made by an older version, or an ingest stopped midway)"
    return (
        f"collection {store.name!r}: its per-domain partition {partition.partition_name(store.name)} {why}, so it was "
        f"rebuilt: {copied:,} chunks copied with their vectors in {time.perf_counter() - t0:.1f} s, nothing embedded again"
    )


def require_replicas(store: KnowledgeStore) -> None:
    """At consistency ALL, raise L1Error unless every replica of every shard is on a healthy node: once
    gossip has dropped a dead node, Weaviate writes at ALL to the replicas left (see `replicas`)."""
    if store.consistency != "ALL":
        return
    try:
        short = shortfall(store.client, store.name)
    except Exception as exc:
        raise L1Error(f"consistency ALL: cannot tell whether every replica of {store.name!r} is up: {exc}") from exc
    if short:
        raise L1Error(short.message())


def _insert(
    store: KnowledgeStore,
    entries: Sequence[Entry],
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    to_partition: partition.PartitionWriter,
) -> None:
    # insert_many is one synchronous gRPC call per slice; the client's batch context manager
    # (collection.batch.fixed_size) spent about 1 s on every exit, whatever the batch size.
    require_replicas(store)  # again for each batch: a node may die during a long ingest
    by_id = {e.entry_id: e for e in entries}
    objects = []
    for chunk, vec in zip(chunks, vectors, strict=True):
        e = by_id[chunk.entry_id]
        card = chunk.card
        objects.append(
            DataObject(
                properties={
                    "entry_id": e.entry_id,
                    "chunk_index": chunk.index,
                    "chunk_count": chunk.count,
                    "content_hash": stored_hash(e),
                    "title": e.title,
                    "category": e.domain,
                    "heading": heading_words(e) if card else "",
                    "keywords": list(e.keywords) if card else [],
                    "entities": list(e.entities) if card else [],
                    "body": e.text if card else "",
                    "text": chunk.text,
                },
                uuid=generate_uuid5(f"{e.entry_id}#{chunk.index}"),
                vector=vec.tolist(),
            )
        )
    for start in range(0, len(objects), INSERT_SLICE):
        try:
            res = store.collection.data.insert_many(objects[start : start + INSERT_SLICE])
        except Exception as exc:
            raise L1Error(f"Weaviate refused chunks during ingest: {type(exc).__name__}: {exc}") from exc
        if res.has_errors:
            first = next(iter(res.errors.values()))
            raise L1Error(f"Weaviate refused {len(res.errors)} chunk(s) during ingest, e.g.: {first.message}")
    to_partition.add(objects)  # the same chunks for the per-domain partition, written as its tenants fill
