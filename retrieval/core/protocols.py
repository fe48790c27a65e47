"""What the lookup needs of its services, as protocols: the core calls a store, a model and a recorder it is
given, and never imports their implementations (retrieval.store, retrieval.records)."""

from __future__ import annotations

from typing import Any, Protocol

from retrieval.core.candidates import Candidate
from retrieval.core.record import InvocationRecord
from retrieval.core.search_request import SearchRequest


class KnowledgeSearch(Protocol):
    """One L1 query of the knowledge store (retrieval.store.weaviate_store.KnowledgeStore)."""

    def search(self, request: SearchRequest) -> list[Candidate]: ...


class QueryEmbedder(Protocol):
    """The embedding model's query vector (retrieval.store.embedding.Embedder)."""

    def embed_query(self, text: str) -> Any: ...


class Recorder(Protocol):
    """Where each lookup's record goes (retrieval.records.invocations.InvocationStore)."""

    def record(self, rec: InvocationRecord) -> None: ...
