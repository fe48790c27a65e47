"""L1: the knowledge collection in Weaviate. Chunks carry self-provided vectors; results fold back into entries."""

from __future__ import annotations

import functools
import time
from typing import Any

from weaviate import WeaviateClient
from weaviate.classes.config import (
    Configure,
    ConsistencyLevel,
    Reconfigure,
    VectorFilterStrategy,
)

from retrieval.core.candidates import Candidate
from retrieval.core.deadline import call_within
from retrieval.core.search_request import SearchRequest
from retrieval.engine.server import Endpoint, answers, port_open
from retrieval.errors import L1Error, StoreError
from retrieval.store.collection_model import description_for, model_in, other_model_message
from retrieval.store.collection_names import MANIFEST_SUFFIX, refuse_clashes
from retrieval.store.collection_schema import (
    FILTER_STRATEGY,
    FLAT_SEARCH_CUTOFF,
    PROPERTIES,
    REBUILD,
    chunk_properties,
    compression_of,
    quantizer_for,
    vector_index,
)
from retrieval.store.partition import handle as partition_handle
from retrieval.store.partition import is_in_step as partition_in_step
from retrieval.store.partition import partition_name, tenant_for
from retrieval.store.search_query import (
    GRACE_S,
    LOADING,
    LOADING_SIGNS,
    MAX_OVERSAMPLE,
    OVERSAMPLE,
    PARTITION_RECHECK_S,
    ask,
    deadline_of,
    failure_reason,
    fold_chunks,
    grouped_to,
    where_of,
)
from retrieval.types.modes import SearchMode


class KnowledgeStore:
    """The Weaviate collection of knowledge chunks. The client is passed in and owned by the caller."""

    def __init__(
        self,
        client: WeaviateClient,
        collection: str,
        *,
        # where the client's gRPC queries go, and their time-out (None: the client's own, no port check after a failure)
        endpoint: Endpoint | None = None,
        replication_factor: int | None = None,  # applies when the collection is created
        shards: int | None = None,  # applies when the collection is created
        consistency: str | None = None,  # ONE, QUORUM or ALL, for every query and insert (None: Weaviate's default)
        # the model whose query vectors search this store: the first search checks the collection holds its vectors
        # (MODEL_NOTE) and raises L1Error if not
        embedding_model: str | None = None,
        # none, rq, pq, bq or sq: the quantizer ensure_collection creates the collection with, or turns on in an
        # uncompressed one (None: DEFAULT_VECTOR_COMPRESSION for a new collection; an existing one is left as it is)
        vector_compression: str | None = None,
    ) -> None:
        """Every setting is passed in (retrieval.store.factory.knowledge_store passes the Settings')."""
        self.client = client
        self.name = collection
        self.endpoint = endpoint
        self.embedding_model = embedding_model
        self._model_checked = embedding_model is None
        self.replication_factor = replication_factor
        self.shards = shards
        self.consistency = consistency
        self.vector_compression = vector_compression
        if self.vector_compression is not None:
            quantizer_for(self.vector_compression)  # ConfigError naming LOOKUP_VECTOR_COMPRESSION
        # Chunk hits fetched per wanted entry by near_vector: 1 until a search folds into fewer than k
        # entries while more hits were there (entries with several chunks), then more, kept for the next search.
        self.fold_factor = 1
        # One handle for the store's life: it is only the name and settings (no server call), and making one
        # per query cost about 0.2 ms of each.
        handle = client.collections.use(collection)
        self.collection: Any = handle.with_consistency_level(ConsistencyLevel(self.consistency)) if self.consistency else handle
        # The per-domain partition (retrieval.store.partition): whether it is in step, as last read (None: not
        # read, or longer ago than PARTITION_RECHECK_S), and a handle per tenant.
        self._partition_read: tuple[float, bool] | None = None
        self._tenants: dict[str, Any] = {}
        self.partitioned = True  # False: filtered searches use the where-filter even so (the bench's strategy rows)

    # --- schema -------------------------------------------------------------------------------------
    def ensure_collection(self, model: str | None = None) -> str | None:
        """Create the collection (its description naming `model`, its vectors' embedding model), or bring an existing one's
        filter settings and vector compression in line; returns what changed on an existing one, or None. Raises StoreError
        when the compression cannot be changed in place. The per-domain partition is the ingest's to keep."""
        if self.client.collections.exists(self.name):
            changes = [self.migrate_compression(), self.migrate_filter_settings()]
            return "; ".join(c for c in changes if c) or None
        self.create_collection(self.name, description=description_for(model) if model else None)
        return None

    def create_collection(
        self,
        name: str,
        *,
        description: str | None = None,
        per_tenant: bool = False,
        compression: str | None = None,
        ef_construction: int | None = None,
        max_connections: int | None = None,
    ) -> None:
        """A collection of knowledge chunks named `name` (PROPERTIES, self-provided vectors in an HNSW index with `compression`,
        else the store's; `ef_construction` and `max_connections` (links per node), else Weaviate's), with the store's
        replication and shards; `per_tenant`: multi-tenant, for the per-domain partition."""

        placement: dict[str, Any] = {}
        if self.replication_factor:
            placement["replication_config"] = Configure.replication(factor=self.replication_factor)
        if per_tenant:
            placement["multi_tenancy_config"] = Configure.multi_tenancy(enabled=True)
        elif self.shards:
            placement["sharding_config"] = Configure.sharding(desired_count=self.shards)
        if description:
            placement["description"] = description
        self.client.collections.create(
            name,
            **placement,
            vector_config=vector_index(
                compression or self.vector_compression, ef_construction=ef_construction, max_connections=max_connections
            ),
            properties=chunk_properties(),
        )

    def vector_index_config(self, name: str) -> Any:
        """The HNSW settings of collection `name` (its default named vector's, or the legacy single vector's)."""
        config = self.client.collections.use(name).config.get()
        named = (config.vector_config or {}).get("default")
        return named.vector_index_config if named is not None else config.vector_index_config

    def compression(self) -> str:
        """The existing collection's vector compression: none, rq, pq, bq or sq."""
        return compression_of(getattr(self.vector_index_config(self.name), "quantizer", None))

    def migrate_compression(self) -> str | None:
        """Bring an existing collection's vector compression in line with `vector_compression` (None: leave it): Weaviate can
        turn a quantizer on in place, but not switch or remove one (then StoreError says to rebuild). Returns what changed,
        or None."""
        want = self.vector_compression
        if want is None:
            return None
        have = self.compression()
        if have == want:
            return None
        if have != "none":
            raise StoreError(
                f"collection {self.name!r} stores its vectors with {have} compression and LOOKUP_VECTOR_COMPRESSION "
                f"asks for {want}: Weaviate cannot change a quantizer in place (only turn one on in an uncompressed "
                f"index). Rebuild the collection with `{REBUILD}` (it drops it and embeds the corpus again), or set "
                f"LOOKUP_VECTOR_COMPRESSION={have} to keep it."
            )
        self.collection.config.update(
            vector_config=Reconfigure.Vectors.update(
                name="default", vector_index_config=Reconfigure.VectorIndex.hnsw(quantizer=quantizer_for(want, reconfigure=True))
            )
        )
        return (
            f"collection {self.name!r}: vector compression none -> {want} (turned on in place, no re-embedding; "
            "LOOKUP_VECTOR_COMPRESSION, see docs/benchmarks.md)"
        )

    def filter_settings(self) -> tuple[str, int]:
        """(filter strategy, flatSearchCutoff) of the existing collection's vector index."""
        vic = self.vector_index_config(self.name)
        strategy = getattr(vic, "filter_strategy", None)
        return str(getattr(strategy, "value", strategy)).lower(), int(getattr(vic, "flat_search_cutoff", 40_000))

    def migrate_filter_settings(self) -> str | None:
        """Set FILTER_STRATEGY and FLAT_SEARCH_CUTOFF on an existing collection made with others (both can be
        changed in place, no re-index); returns what changed, for the caller to say, or None."""
        have = self.filter_settings()
        want = (FILTER_STRATEGY, FLAT_SEARCH_CUTOFF)
        if have == want:
            return None
        self.collection.config.update(
            vector_config=Reconfigure.Vectors.update(
                name="default",
                vector_index_config=Reconfigure.VectorIndex.hnsw(
                    filter_strategy=VectorFilterStrategy(FILTER_STRATEGY), flat_search_cutoff=FLAT_SEARCH_CUTOFF
                ),
            )
        )
        return (
            f"collection {self.name!r}: filter strategy {have[0]} -> {want[0]}, flatSearchCutoff {have[1]:,} -> {want[1]:,} "
            "(changed in place: filtered search is no slower than unfiltered with these, see docs/benchmarks.md)"
        )

    def stored_model(self) -> str | None:
        """The embedding model the existing collection says it holds (None: not recorded, or no collection)."""
        if not self.client.collections.exists(self.name):
            return None
        return model_in(self.collection.config.get().description)

    def _verify_model(self, timeout_s: float | None) -> None:
        """Once, after a search the server answered: raise L1Error when the collection holds another embedding
        model's vectors than this store's. A description that cannot be read leaves the check to the next search."""
        try:
            stored = self.stored_model() if timeout_s is None else call_within(self.stored_model, timeout_s)
        except Exception:
            return
        if stored is not None and self.embedding_model is not None and stored != self.embedding_model:
            raise L1Error(other_model_message(self.name, stored, self.embedding_model))
        self._model_checked = True

    def schema_current(self) -> bool:
        """False when the collection exists with another version's fields (no lexical fields)."""
        if not self.client.collections.exists(self.name):
            return True
        have = {p.name for p in self.collection.config.get().properties}
        return set(PROPERTIES) <= have

    def drop(self) -> None:
        """Delete the collection, its per-domain partition and the ingest's manifest of it (retrieval.store.manifest).
        Raises ConfigError, deleting nothing, when a name clashes with another collection's (Weaviate ignores case)."""
        refuse_clashes(self.client, self.name)
        for name in (self.name, partition_name(self.name), self.name + MANIFEST_SUFFIX):
            if self.client.collections.exists(name):
                self.client.collections.delete(name)
        self.forget_partition()

    # --- the per-domain partition -------------------------------------------------------------------
    def forget_partition(self) -> None:
        """Read the partition's state again at the next filtered search (the ingest calls this when it changes it)."""
        self._partition_read = None
        self._tenants = {}

    def tenant_of(self, category: str, timeout_s: float | None = None) -> Any | None:
        """The handle of `category`'s tenant in the per-domain partition when the partition is in step with the
        collection (read at most every PARTITION_RECHECK_S, within `timeout_s`), else None: search with the
        where-filter."""
        now = time.monotonic()
        if self._partition_read is None or now - self._partition_read[0] > PARTITION_RECHECK_S:
            try:  # only the read goes on a helper thread: most searches find the state read already
                ready = (
                    partition_in_step(self)
                    if timeout_s is None
                    else call_within(functools.partial(partition_in_step, self), timeout_s)
                )
            except Exception:  # cannot tell (or no answer in time): the where-filter answers correctly either way
                ready = False
            self._partition_read = (now, ready)
        if not self._partition_read[1]:
            return None
        tenant = tenant_for(category)
        if tenant not in self._tenants:
            self._tenants[tenant] = partition_handle(self).with_tenant(tenant)
        return self._tenants[tenant]

    # --- ingest -------------------------------------------------------------------------------------
    def indexed_state(self) -> dict[str, tuple[str, int, int]]:
        """entry_id -> (content_hash, chunks stored, chunk_count expected), read from the server."""
        if not self.client.collections.exists(self.name):
            return {}
        seen: dict[str, list] = {}
        for obj in self.collection.iterator(return_properties=["entry_id", "content_hash", "chunk_count"]):
            p = obj.properties
            state = seen.setdefault(p["entry_id"], [p["content_hash"], 0, int(p["chunk_count"] or 0)])
            if state[0] == p["content_hash"]:
                state[1] += 1
            else:
                state[0] = "mixed"
        return {k: (v[0], v[1], v[2]) for k, v in seen.items()}

    def indexed_entry_ids(self) -> set[str]:
        return {k for k, (h, n, want) in self.indexed_state().items() if n == want}

    # --- search -------------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> list[Candidate]:
        """Top `request.limit` entries of one query (SearchRequest: its mode, filter, `entries` and `cards_of`), each with the
        cosine of the request's vector to its best chunk when a vector is given. Raises L1Error past the time-out; after a
        failure, the next search first checks that the port answers at all."""
        if not isinstance(request, SearchRequest):
            raise TypeError(f"KnowledgeStore.search takes a SearchRequest, not {type(request).__name__}")
        if request.cards_of is not None and not request.cards_of:
            return []
        endpoint = self.endpoint
        timeout_s = request.timeout_s if request.timeout_s is not None or endpoint is None else endpoint.timeout_s
        failed = f"Weaviate {request.mode} query on '{self.name}' failed"
        if (
            endpoint is not None
            and endpoint.suspect
            and not port_open(endpoint.host, endpoint.grpc_port, min(timeout_s or 1.0, 1.0))
        ):
            raise L1Error(f"{failed}: nothing answers on {endpoint.host}:{endpoint.grpc_port} (the server is down)")
        # A vector search on one domain goes to the domain's tenant of the partition, unfiltered (BM25F and hybrid
        # stay on the collection: a tenant's term statistics are its domain's, which would change their scores).
        # weaviate-client retries a refused gRPC search with back-off for about a minute whatever its time-out, so
        # each query runs on a helper thread that is abandoned at the deadline (retrieval.core.deadline).
        deadline = deadline_of(timeout_s)
        tenant = None
        if (
            self.partitioned
            and request.mode is SearchMode.NEAR_VECTOR
            and request.category is not None
            and request.cards_of is None
        ):
            tenant = self.tenant_of(request.category, timeout_s)
        return self._fetch(request, tenant, deadline, timeout_s, failed)

    def _fetch(
        self, request: SearchRequest, tenant: Any, deadline: float | None, timeout_s: float | None, failed: str
    ) -> list[Candidate]:
        """The request's hits folded into entries (bm25 hits cards, one per entry). The top k of k*f chunk hits are the true top
        k once they are k distinct entries; when fewer while the hits filled the limit, it asks again with twice as many
        (near_vector keeps the factor for the next search)."""
        mode, k, endpoint = request.mode, request.limit, self.endpoint
        floats = None if request.vector is None else list(map(float, request.vector))  # once, even when asked again
        # with `entries` known, near_vector has Weaviate group chunk hits by entry (less to send and fold); without it
        # the chunk hits come back whole, which shows by itself when the collection is exhausted
        where, group_to = where_of(request), grouped_to(request)
        factor = 1 if mode is SearchMode.BM25 else OVERSAMPLE if mode is SearchMode.HYBRID else self.fold_factor
        while True:
            limit = k * factor
            handle = self.collection if tenant is None else tenant
            run = functools.partial(ask, handle, request, floats, where, limit, in_tenant=tenant is not None)
            try:
                res = run() if deadline is None else call_within(run, max(deadline - time.monotonic(), 0.05) + GRACE_S)
            except Exception as exc:
                said = str(exc).lower()
                if tenant is not None and ("tenant" in said or any(sign in said for sign in LOADING_SIGNS)):
                    # No tenant for this domain (the partition changed since it was read), or the partition is not
                    # loaded yet (a restarted server loads it after the collection): the where-filter on the
                    # collection answers, or fails as the collection does (loading, down), and the partition's
                    # state is read again at the next search.
                    tenant = None
                    self.forget_partition()
                    continue
                if endpoint is not None:
                    endpoint.suspect = True
                loading = self.loading() if any(sign in str(exc).lower() for sign in LOADING_SIGNS) else None
                raise L1Error(f"{failed}: {loading or failure_reason(exc, timeout_s)}", unavailable=bool(loading)) from exc
            if endpoint is not None:
                endpoint.suspect = False
            if not self._model_checked:
                self._verify_model(timeout_s)
            found = fold_chunks(res.objects, k=k, mode=mode, vector=floats)
            if not found and (loading := self.loading()):  # not an empty answer: no answer yet
                raise L1Error(f"{failed}: {loading}", unavailable=True)
            exhausted = len(found) >= group_to if group_to is not None else len(res.objects) < limit
            if len(found) >= k or exhausted or factor >= MAX_OVERSAMPLE:
                return found
            factor *= 2
            if mode is SearchMode.NEAR_VECTOR:
                self.fold_factor = factor

    def loading(self) -> str | None:
        """Why the collection cannot be searched yet while its server answers (a restarted Weaviate loading
        its shards), or None: it can be searched, or the server does not answer at all (down is not loading)."""
        endpoint = self.endpoint
        if endpoint is not None and not port_open(endpoint.host, endpoint.grpc_port, 0.5):
            return None
        try:
            if not answers(self.client.is_ready):
                return LOADING
            if not self.client.collections.exists(self.name):
                return None
            statuses = {str(getattr(s.status, "value", s.status)).upper() for s in self.collection.config.get_shards()}
        except Exception:
            return None
        return LOADING if "LOADING" in statuses else None

    def count_chunks(self) -> int:
        if not self.client.collections.exists(self.name):
            return 0
        return int(self.collection.aggregate.over_all(total_count=True).total_count or 0)
