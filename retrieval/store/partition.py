"""The per-domain partition of a knowledge collection: the same chunks and vectors in a multi-tenant collection beside
it, one tenant per domain, so a search filtered on one domain walks that tenant's own graph instead of a where-filter.
When not in step (checked at an ingest's end) it is rebuilt by copy, and searches use the where-filter meanwhile.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.config import ConsistencyLevel
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter
from weaviate.classes.tenants import Tenant

from retrieval.errors import L1Error


class KnowledgeStore(Protocol):
    """What the partition needs of the collection it stands beside (retrieval.store.weaviate_store.KnowledgeStore,
    which imports this module: the partition is handed the store, never imports it)."""

    name: str
    client: Any
    collection: Any
    consistency: str | None

    def forget_partition(self) -> None: ...

    def compression(self) -> str: ...

    def vector_index_config(self, name: str) -> Any: ...

    def create_collection(
        self,
        name: str,
        *,
        description: str | None = None,
        per_tenant: bool = False,
        compression: str | None = None,
        ef_construction: int | None = None,
        max_connections: int | None = None,
    ) -> None: ...


SUFFIX = "_ByDomain"
IN_STEP = "in step"
BUILDING = "building"
TENANT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # Weaviate's rule for tenant names
WRITE_SLICE = 500  # chunks per insert_many call
DELETE_SLICE = 200  # entry ids per delete_many call
COPY_BATCH = 2000  # chunks read from the collection before they are written to the partition
# The tenants' HNSW graphs are built with three times Weaviate's default efConstruction (128). The ingest writes an
# entry's chunks one after another, and graphs built from such runs of near neighbours find fewer of the true
# ones: at 100k synthetic entries (tenants of 24k chunks, 300 queries, recall@10 against the exact ranking)
# efConstruction 128 gave 0.952, 256 0.985, 384 and 512 0.995, building the tenants 1.0, 1.9, 2.7 and 2.9 times
# as long (docs/history/benchmarks-notebook.md, "Tenant graphs"). A partition made with another value is made again by the next
# ingest, which copies into it.
EF_CONSTRUCTION = 384
# Each node of a tenant's graph keeps 16 links where Weaviate's default is 32. A tenant search at the depth the
# lookup asks for walks as many candidates as a search of the whole collection, and most of its cost is that walk;
# with half the links each step reads half the neighbours. At 100k synthetic entries, in full bench runs, filtered
# over unfiltered L1 went from 1.055 to 1.006 and 0.980, filtered recall@10 (300 queries) from 0.996 to 0.990 and
# 0.991 (docs/history/benchmarks-notebook.md, "16 links per node"). The shared eval sets rank every case the same.
MAX_CONNECTIONS = 16
GRAPH = (EF_CONSTRUCTION, MAX_CONNECTIONS)


def partition_name(collection: str) -> str:
    return f"{collection}{SUFFIX}"


def tenant_for(domain: str) -> str:
    """The tenant of a domain: the domain itself when it is a valid tenant name (letters, digits, _ and -, up to
    64), else its safe characters and a hash of the whole, so that distinct domains get distinct tenants."""
    if TENANT_NAME.fullmatch(domain):
        return domain
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", domain)[:40]
    return f"{safe}-{hashlib.sha1(domain.encode('utf-8')).hexdigest()[:16]}"


def description_of(collection: str, state: str) -> str:
    return f"Lookup Lab per-domain partition of {collection}; {state}"


def is_in_step(store: KnowledgeStore) -> bool:
    """Whether the partition exists and the last ingest left it in step with the collection."""
    name = partition_name(store.name)
    if not store.client.collections.exists(name):
        return False
    return (store.client.collections.use(name).config.get().description or "").endswith(IN_STEP)


def ensure_partition(store: KnowledgeStore) -> bool:
    """Make the partition (marked building) when there is none, or none built as GRAPH says (it is dropped: the
    ingest's end finds it out of step and copies the chunks into it), with the collection's own vector
    compression. Returns whether it was made."""
    name = partition_name(store.name)
    if store.client.collections.exists(name):
        if graph_settings(store) == GRAPH:
            return False
        store.client.collections.delete(name)
        store.forget_partition()
    store.create_collection(
        name,
        description=description_of(store.name, BUILDING),
        per_tenant=True,
        compression=store.compression(),
        ef_construction=EF_CONSTRUCTION,
        max_connections=MAX_CONNECTIONS,
    )
    return True


def graph_settings(store: KnowledgeStore) -> tuple[int | None, int | None]:
    """(efConstruction, maxConnections) of the existing partition's graphs."""
    config = store.vector_index_config(partition_name(store.name))
    return getattr(config, "ef_construction", None), getattr(config, "max_connections", None)


def mark(store: KnowledgeStore, state: str) -> None:
    """Say in the partition's description whether searches may use it (IN_STEP) or not (BUILDING)."""
    handle = store.client.collections.use(partition_name(store.name))
    if (handle.config.get().description or "").endswith(state):
        return
    handle.config.update(description=description_of(store.name, state))
    store.forget_partition()


def handle(store: KnowledgeStore) -> Any:
    """The partition collection's handle, at the store's consistency level."""
    coll = store.client.collections.use(partition_name(store.name))
    return coll.with_consistency_level(ConsistencyLevel(store.consistency)) if store.consistency else coll


def write(store: KnowledgeStore, objects: Sequence[DataObject[Any, Any]]) -> None:
    """Store these chunks (with their uuids and vectors) in their domains' tenants, making the tenants missing."""
    by_tenant: dict[str, list[DataObject[Any, Any]]] = {}
    for obj in objects:
        props: Any = obj.properties
        by_tenant.setdefault(tenant_for(str(props["category"])), []).append(obj)
    if not by_tenant:
        return
    coll = handle(store)
    missing = sorted(set(by_tenant) - set(coll.tenants.get()))
    if missing:
        coll.tenants.create([Tenant(name=t) for t in missing])
    for tenant, objs in by_tenant.items():
        part = coll.with_tenant(tenant)
        for start in range(0, len(objs), WRITE_SLICE):
            try:
                res = part.data.insert_many(objs[start : start + WRITE_SLICE])
            except Exception as exc:
                raise L1Error(f"Weaviate refused chunks of tenant {tenant!r} in {partition_name(store.name)}: {exc}") from exc
            if res.has_errors:
                first = next(iter(res.errors.values()))
                raise L1Error(
                    f"Weaviate refused {len(res.errors)} chunk(s) of tenant {tenant!r} in {partition_name(store.name)}, "
                    f"e.g.: {first.message}"
                )


class PartitionWriter:
    """Chunks for the partition, gathered per tenant and written WRITE_SLICE at a time (an ingest batch spreads over every
    domain, so a call per tenant per batch would be slow). `flush()` writes what is left; the ingest calls it before
    it checks the partition."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self._pending: dict[str, list[DataObject[Any, Any]]] = {}

    def add(self, objects: Sequence[DataObject[Any, Any]]) -> None:
        for obj in objects:
            props: Any = obj.properties
            self._pending.setdefault(tenant_for(str(props["category"])), []).append(obj)
        full = [obj for t in [t for t, objs in self._pending.items() if len(objs) >= WRITE_SLICE] for obj in self._pending.pop(t)]
        write(self.store, full)

    def flush(self) -> None:
        rest = [obj for objs in self._pending.values() for obj in objs]
        self._pending = {}
        write(self.store, rest)


def delete_entries(store: KnowledgeStore, entry_ids: Sequence[str]) -> None:
    """Delete these entries' chunks from every tenant (the caller need not know their domains)."""
    if not entry_ids:
        return
    coll = handle(store)
    for tenant in coll.tenants.get():
        part = coll.with_tenant(tenant)
        for start in range(0, len(entry_ids), DELETE_SLICE):
            part.data.delete_many(
                where=Filter.by_property("entry_id").contains_any(list(entry_ids[start : start + DELETE_SLICE]))
            )


def domain_counts(store: KnowledgeStore) -> dict[str, int]:
    """Chunks per tenant as the collection holds them (its chunks grouped by domain)."""
    res = store.collection.aggregate.over_all(group_by=GroupByAggregate(prop="category"), total_count=True)
    out: dict[str, int] = {}
    for group in res.groups:
        tenant = tenant_for(str(group.grouped_by.value))
        out[tenant] = out.get(tenant, 0) + int(group.total_count or 0)
    return {t: n for t, n in out.items() if n}


def tenant_counts(store: KnowledgeStore) -> dict[str, int]:
    """Chunks per tenant as the partition holds them."""
    coll = handle(store)
    counts = {t: int(coll.with_tenant(t).aggregate.over_all(total_count=True).total_count or 0) for t in coll.tenants.get()}
    return {t: n for t, n in counts.items() if n}


def in_step(store: KnowledgeStore) -> bool:
    """Whether every domain holds as many chunks in the partition as in the collection."""
    return domain_counts(store) == tenant_counts(store)


def as_objects(found: Iterable[Any]) -> list[DataObject[Any, Any]]:
    out = []
    for obj in found:
        vector = obj.vector.get("default") if isinstance(obj.vector, dict) else None
        out.append(DataObject(properties=dict(obj.properties), uuid=obj.uuid, vector=vector))
    return out


def rebuild(store: KnowledgeStore, progress: Callable[[int], None] | None = None) -> int:
    """A new partition holding the collection's chunks as they are (vectors copied, none embedded), marked in
    step; returns how many chunks it copied. `progress(copied)` after each batch."""
    name = partition_name(store.name)
    if store.client.collections.exists(name):
        store.client.collections.delete(name)
    store.forget_partition()
    ensure_partition(store)
    copied = 0
    pending: list[Any] = []
    for obj in store.collection.iterator(include_vector=True):
        pending.append(obj)
        if len(pending) >= COPY_BATCH:
            write(store, as_objects(pending))
            copied += len(pending)
            pending = []
            if progress:
                progress(copied)
    if pending:
        write(store, as_objects(pending))
        copied += len(pending)
    mark(store, IN_STEP)
    return copied
