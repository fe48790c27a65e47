"""The edge where services are built from settings: corpus, L0 index, model, Weaviate, invocation store."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from weaviate import WeaviateClient

from retrieval.config import Settings, db_budget
from retrieval.core.corpus import Corpus, load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.engine.server import connect
from retrieval.errors import L1Error, WeaviateSetupError
from retrieval.records.invocations import InvocationStore
from retrieval.records.spool import SpoolRecorder
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.weaviate_store import KnowledgeStore


@dataclass
class Runtime:
    """Everything a process opened, so it can be closed in one place."""

    settings: Settings
    corpus: Corpus
    services: LookupServices
    client: WeaviateClient | None = None

    def close(self) -> None:
        if self.services.recorder is not None:
            self.services.recorder.close()
        if self.client is not None:
            with contextlib.suppress(Exception):  # closing is best effort: the server may be gone already
                self.client.close()


def open_store(settings: Settings) -> tuple[WeaviateClient | None, KnowledgeStore | None, str | None]:
    """(client, store, why-unavailable). Never raises for an unreachable server."""
    try:
        client = connect(settings)
    except (L1Error, WeaviateSetupError) as exc:
        return None, None, str(exc)
    return client, knowledge_store(client, settings), None


def open_embedder(settings: Settings) -> Embedder:
    """The embedding model the settings name, from the model cache or `model_dir`. Raises ModelError."""
    return Embedder(settings.embedding_model, model_dir=settings.model_dir)


def open_runtime(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    record: bool | Literal["spool", "spool-each"] = True,
    connect_l1: bool = True,
    log: Callable[[str], None] | None = None,
) -> Runtime:
    corpus = load_corpus(settings.corpus_dir)
    if log:
        for problem in corpus.problems:
            log(f"skipped {problem.reason}")
    client = store = None
    why = None
    if settings.l1_enabled and connect_l1:
        client, store, why = open_store(settings)
        if embedder is None and store is not None:
            embedder = open_embedder(settings)
    recorder: InvocationStore | SpoolRecorder | None = None
    if record in ("spool", "spool-each"):  # its rows wait in the spool for the next store that flushes: a
        # short-lived process's file is finished as it closes, a long-lived one's ("spool-each") after each record
        recorder = SpoolRecorder(settings.invocation_db, finish_each=record == "spool-each")
    elif record:
        recorder = InvocationStore(settings.invocation_db, budget=db_budget(settings))
        recorder.start_background_flush()
    services = LookupServices[KnowledgeStore, Embedder, InvocationStore | SpoolRecorder](
        l0=L0Index(corpus.entries), embedder=embedder, store=store, recorder=recorder, l1_unavailable=why
    )
    return Runtime(settings, corpus, services, client)
