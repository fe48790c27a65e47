"""The Python API: `with open_lookup() as kb: kb.lookup(query, top_k=3)` opens the services once (corpus, L0 index, model,
Weaviate, invocation store) and looks up as often as needed, each lookup recorded like the app's and the CLI's.
The MCP server (retrieval.serve.mcp_server) is a thin protocol layer over this object.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from retrieval.config import Settings, load_settings
from retrieval.core.corpus import Entry
from retrieval.core.lookup import LookupResult, lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import EntryNotFound, QueryError
from retrieval.services import Runtime, open_runtime, refresh_support_fit, stored_norms
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.types.limits import EXCERPT_CHARS, MAX_TOP_K


def check_top_k(value: Any) -> int | None:
    """None (the configured top_k) or a whole number in 1..MAX_TOP_K; anything else is refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueryError(f"top_k must be a whole number between 1 and {MAX_TOP_K}, got {type(value).__name__} {value!r}")
    if not 1 <= value <= MAX_TOP_K:
        raise QueryError(f"top_k must be between 1 and {MAX_TOP_K}, got {value}")
    return value


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first prose of an entry body (headings and code fences left out), cut at a word near `limit`."""
    lines = [ln.strip() for ln in text.splitlines()]
    flat = " ".join(ln for ln in lines if ln and not ln.startswith(("#", "```", "~~~")))
    flat = " ".join(flat.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit].rstrip(" ,;:.") + "…"


FIT_RECHECK_S = 10.0  # a long-lived process reads the collection's support fit again at most this often


class KnowledgeLookup:
    """Open services and the lookups over them. Thread-safe: calls may run concurrently. The collection's support
    fit is read again every `fit_recheck_s` (an ingest elsewhere refits it), at the first lookup after that long."""

    def __init__(self, runtime: Runtime, *, fit_recheck_s: float = FIT_RECHECK_S) -> None:
        self.runtime = runtime
        self._entries = runtime.corpus.by_id()
        self._openings: dict[str, str] = {}
        self.options = runtime.settings.options()  # what every lookup reads: built once
        self._fit_recheck_s = fit_recheck_s
        self._fit_read = time.monotonic()

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def l1_unavailable(self) -> str | None:
        """Why L1 is not used (None when it is connected, or disabled on purpose)."""
        return self.runtime.services.l1_unavailable

    def lookup(self, query: str, top_k: int | None = None, *, session_tag: str | None = None) -> LookupResult:
        """lookup_knowledge once, recorded. Raises QueryError for a refused query or top_k."""
        k = check_top_k(top_k)
        return lookup_knowledge(query, self._services(), self.options, top_k=k, session_tag=session_tag)

    def _services(self) -> LookupServices:
        """The services, their support fit read again when it is due."""
        services = self.runtime.services
        if services.store is None or time.monotonic() - self._fit_read < self._fit_recheck_s:
            return services
        norms = stored_norms(services.store)
        self._fit_read = time.monotonic()
        if norms != services.norms:
            services = self.runtime.services = dataclasses.replace(services, norms=norms)
        return services

    def entry(self, entry_id: str) -> Entry:
        """The whole entry. Raises EntryNotFound (or QueryError for an id that is not text)."""
        if not isinstance(entry_id, str):
            raise QueryError(f"entry_id must be text, got {type(entry_id).__name__} {entry_id!r}")
        found = self._entries.get(entry_id.strip())
        if found is None:
            raise EntryNotFound(entry_id, len(self._entries))
        return found

    def opening(self, entry_id: str) -> str:
        """The excerpt of an entry's opening prose (cached); "" for an id not in the corpus."""
        found = self._openings.get(entry_id)
        if found is None:
            entry = self._entries.get(entry_id)
            found = self._openings[entry_id] = excerpt(entry.text) if entry is not None else ""
        return found

    def entries(self) -> list[Entry]:
        return list(self.runtime.corpus.entries)

    def flush(self) -> int:
        """Move recorded calls from the spool into the DuckDB file now (the background flusher does it every second)."""
        recorder = self.runtime.services.recorder
        return recorder.flush() if recorder is not None else 0

    def close(self) -> None:
        """Flush the invocation spool and close Weaviate (stopping the embedded server only if this process started it)."""
        self.runtime.close()


def open_knowledge_lookup(
    settings: Settings | None = None,
    *,
    record: bool = True,
    embedder: Embedder | None = None,
    ingest: bool = False,
    log: Callable[[str], None] | None = None,
) -> KnowledgeLookup:
    """Open the services. The caller closes the result (or uses `open_lookup`)."""
    settings = settings or load_settings()
    runtime = open_runtime(settings, embedder=embedder, record=record, log=log)
    try:
        store = runtime.services.store
        if ingest and store is not None:
            report = indexing.ingest(store, runtime.corpus, runtime.services.embedder)
            ran = refresh_support_fit(runtime)
            if log:
                log(f"collection {settings.collection}: {report.unchanged} unchanged, {report.added + report.updated} embedded")
                if ran is not None:
                    log(f"support baselines fitted on {ran.probes} probes of the knowledge base in {ran.seconds:.1f} s")
        elif store is not None and log and store.count_chunks() == 0:
            log(
                f"collection {settings.collection} is empty: answers come from L0 only until "
                "`python -m retrieval ingest` (or serve --ingest) has indexed the corpus"
            )
        if log and runtime.services.l1_unavailable:
            log(f"L1 unavailable, answering from L0: {runtime.services.l1_unavailable}")
    except BaseException:
        runtime.close()
        raise
    return KnowledgeLookup(runtime)


@contextmanager
def open_lookup(
    settings: Settings | None = None,
    *,
    record: bool = True,
    embedder: Embedder | None = None,
    ingest: bool = False,
    log: Callable[[str], None] | None = None,
) -> Iterator[KnowledgeLookup]:
    """Open the services once; `.lookup(query, top_k=None)` as often as needed; close on exit (the spool flushed, an
    embedded Weaviate this process started stopped). `settings`: defaults < lookup.yaml < LOOKUP_* environment.
    `ingest=True` indexes the corpus first (unchanged entries are not embedded again)."""
    kb = open_knowledge_lookup(settings, record=record, embedder=embedder, ingest=ingest, log=log)
    try:
        yield kb
    finally:
        kb.close()
