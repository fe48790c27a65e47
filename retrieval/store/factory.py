"""The one way to open a knowledge store: a KnowledgeStore built from Settings, every collection setting passed in."""

from __future__ import annotations

from weaviate import WeaviateClient

from retrieval.config import Settings
from retrieval.engine.server import endpoint_for
from retrieval.store.weaviate_store import KnowledgeStore


def knowledge_store(
    client: WeaviateClient, settings: Settings, *, collection: str | None = None, embedding_model: str | None = None
) -> KnowledgeStore:
    """The store of `collection` (default: the settings') on `client`: the settings' endpoint (its gRPC port and time-out),
    replication, shards, consistency and vector compression, searched with `embedding_model`'s vectors (default: the
    settings' model; "" for vectors that are no model's, as the bench's synthetic ones)."""
    model = settings.embedding_model if embedding_model is None else embedding_model or None
    return KnowledgeStore(
        client,
        collection or settings.collection,
        endpoint=endpoint_for(settings),
        replication_factor=settings.replication_factor,
        shards=settings.shards,
        consistency=settings.consistency,
        embedding_model=model,
        vector_compression=settings.vector_compression,
    )
