"""What the lookup needs of its services, as protocols, and the bundle of them it is given (LookupServices): the core
calls a store, a model and a recorder, and never imports their implementations (retrieval.store, retrieval.records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from retrieval.core.candidates import Candidate
from retrieval.core.hints import L0Index
from retrieval.core.record import InvocationRecord
from retrieval.core.search_request import SearchRequest
from retrieval.core.support_norms import SupportNorms


class KnowledgeSearch(Protocol):
    """One L1 query of the knowledge store (retrieval.store.weaviate_store.KnowledgeStore)."""

    def search(self, request: SearchRequest) -> list[Candidate]: ...


class QueryEmbedder(Protocol):
    """The embedding model's query vector (retrieval.store.embedding.Embedder)."""

    def embed_query(self, text: str) -> Any: ...


class Recorder(Protocol):
    """Where each lookup's record goes (retrieval.records.invocations.InvocationStore)."""

    def record(self, rec: InvocationRecord) -> None: ...


Store = TypeVar("Store", bound=KnowledgeSearch)
Model = TypeVar("Model", bound=QueryEmbedder)
Sink = TypeVar("Sink", bound=Recorder)


@dataclass(frozen=True)
class LookupServices(Generic[Store, Model, Sink]):
    """What a lookup needs, passed in. `store`/`embedder` are None when L1 is off or unreachable. Generic in
    the services' types: the lookup needs only their protocols (retrieval.core.protocols), while the edge that
    opened them (retrieval.services) keeps their own types."""

    l0: L0Index
    embedder: Model | None = None
    store: Store | None = None
    recorder: Sink | None = None
    l1_unavailable: str | None = None  # why L1 cannot be used, when it cannot
    norms: SupportNorms | None = None  # the knowledge base's support baselines; None: the model's reference ones
