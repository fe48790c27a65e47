"""The edge where services are built from settings: corpus, L0 index, model, Weaviate, invocation store."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from weaviate import WeaviateClient

from retrieval.config import Settings, db_budget
from retrieval.core.corpus import Corpus, load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.core.self_calibration import SelfCalibration
from retrieval.core.support_norms import SupportNorms
from retrieval.engine.server import connect, place
from retrieval.errors import L1Error, WeaviateSetupError
from retrieval.records.invocations import InvocationStore
from retrieval.records.spool import SpoolRecorder
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.support_fit import ensure_fit, read_fit
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
        placed = place(settings)  # a server of another data directory on the port is neither used nor written to
        settings = placed.settings
        if log and placed.note:
            log(placed.note)
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
        l0=L0Index(corpus.entries),
        embedder=embedder,
        store=store,
        recorder=recorder,
        l1_unavailable=why,
        norms=stored_norms(store),
    )
    return Runtime(settings, corpus, services, client)


def stored_norms(store: KnowledgeStore | None) -> SupportNorms | None:
    """The support baselines the collection keeps (retrieval.store.support_fit), or None (the lookup then reads the
    model's reference ones): no store, no fit yet, or one that cannot be read."""
    if store is None:
        return None
    try:
        fit = read_fit(store)
    except Exception:  # an unreadable fit, or a server that cannot answer now: the reference baselines serve
        return None
    return None if fit is None else fit.norms


def refresh_support_fit(
    runtime: Runtime, *, progress: Callable[[str, int, int], None] | None = None, force: bool = False
) -> SelfCalibration | None:
    """After an ingest: the collection's support fit made current (a self-calibration when its key changed, or
    `force`), and the runtime's lookups reading it. Returns the calibration when one ran. Raises LookupLabError."""
    services = runtime.services
    if services.store is None or services.embedder is None:
        return None
    norms, ran = ensure_fit(services.store, runtime.corpus, services, runtime.settings, progress=progress, force=force)
    runtime.services = replace(services, norms=norms)
    return ran


def other_model_services(
    runtime: Runtime,
    model: str,
    *,
    embedder: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> LookupServices:
    """The runtime's services searching with another embedding model: that model's own collection of this knowledge
    base, over the one connection, brought up to date first (what a sweep and "what it would take" try). Raises
    L1Error when the runtime has no Weaviate, ModelError for a model that cannot be loaded."""
    if runtime.client is None:
        raise L1Error(f"embedding model {model!r} needs Weaviate: {runtime.services.l1_unavailable or 'L1 is off'}")
    other = runtime.settings.with_(embedding_model=model)
    services = replace(
        runtime.services,
        embedder=embedder or open_embedder(other),
        store=knowledge_store(runtime.client, other),
        norms=None,
    )
    from retrieval.store import indexing  # the ingest pulls in the chunker and the Weaviate batch code

    assert services.store is not None
    indexing.ingest(services.store, runtime.corpus, services.embedder, progress=progress)
    return services
