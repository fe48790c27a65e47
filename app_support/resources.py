"""Process-wide cached resources (the model, the Weaviate connection, each corpus and its L0 index, the invocation
store) and the settings of the current view."""

# The model and the connection open on threads of their own: the frame waits for a running or remote Weaviate at
# most `app_l1_wait_s` and not at all for an embedded one starting cold, so a page renders while the server starts
# and a page that needs L1 waits for it (AppContext.conn). A failed connection is cached too, so pages do not wait
# on a dead server every rerun: it is retried after RETRY_AFTER_S, or at once with "Retry connection".

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import streamlit as st
from weaviate import WeaviateClient

from retrieval.config import Settings, load_settings
from retrieval.core.corpus import Corpus, load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.core.support_norms import SupportNorms
from retrieval.engine.server import answers, connect, place, port_open
from retrieval.errors import L1Error, LookupLabError, StoreError, WeaviateSetupError
from retrieval.evals.catalog import CorpusChoice, added_corpora, known_corpora, same_path
from retrieval.records.invocations import InvocationStore
from retrieval.services import stored_norms
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.weaviate_store import KnowledgeStore
from retrieval.types.budget import DbBudget

from . import keys
from .access import WriteAccess, server_address, write_access
from .setting_widgets import settings_changes

RETRY_AFTER_S = 30.0


# --- settings --------------------------------------------------------------------------------------------
def base_settings() -> Settings:
    """Defaults < lookup.yaml < LOOKUP_* environment. Raises ConfigError with the setting at fault."""
    return load_settings()


def corpus_choices(base: Settings, *, adding: Path | None = None) -> list[CorpusChoice]:
    """The corpora the sidebar offers: the known ones, then the folders added on the Corpus page (and `adding`)."""
    return known_corpora(base, extra=[*added_corpora(base), *([adding] if adding else [])])


def _with_model(base: Settings, model: str) -> Settings:
    """`base` with the sidebar's model: the corpus choices name this model's collections."""
    return base if model == base.embedding_model else base.with_(embedding_model=model)


def current_settings(base: Settings | None = None) -> Settings:
    """The base settings with the sidebar's choices (setting_widgets.WIDGETS) applied."""
    base = base or base_settings()
    state = st.session_state
    changes = settings_changes(state)
    base = _with_model(base, changes.pop("embedding_model", base.embedding_model))
    label = state.get(keys.CORPUS)
    choice = next((c for c in corpus_choices(base) if c.label == label), None)
    if choice is not None and not same_path(choice.path, base.corpus_dir):
        changes.update(corpus_dir=choice.path, collection=choice.collection)
    return base.with_(**changes)


def folder_choice(settings: Settings, folder: Path) -> CorpusChoice:
    """`folder` as the sidebar would offer it once added: its label and its own collection, derived as for the
    other corpora (current `settings` give the model)."""
    base = _with_model(base_settings(), settings.embedding_model)
    return next(c for c in corpus_choices(base, adding=folder) if same_path(c.path, folder))


# --- Weaviate ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Connection:
    client: WeaviateClient | None
    error: str | None  # why L1 is unavailable; None when connected
    target: str  # where, for people (never the API key)
    opened_at: float

    @property
    def ok(self) -> bool:
        return self.client is not None


def describe_target(settings: Settings) -> str:
    if settings.weaviate_url:
        url = urlparse(settings.weaviate_url)
        host = url.hostname or "?"
        port = f":{url.port}" if url.port else ""
        return f"remote Weaviate at {url.scheme}://{host}{port}"
    return f"embedded Weaviate on 127.0.0.1:{settings.embedded_port}"


def _connection_key(settings: Settings) -> tuple:
    secret = hashlib.sha256((settings.weaviate_api_key or "").encode()).hexdigest()[:12]
    return (
        settings.weaviate_url,
        secret,
        settings.remote_grpc_port,
        settings.embedded_port,
        settings.embedded_grpc_port,
        str(settings.weaviate_data_dir),
        str(settings.weaviate_bin_dir),
        settings.weaviate_version,
        settings.l1_timeout_s,
    )


def _still_good(conn: Connection) -> bool:
    if conn.client is None:
        return time.monotonic() - conn.opened_at < RETRY_AFTER_S
    try:
        return answers(conn.client.is_live)
    except Exception:
        return False


def _release(conn: Connection) -> None:
    if conn.client is not None:
        with contextlib.suppress(Exception):  # closing is best effort: the server may be gone already
            conn.client.close()


def _open(settings: Settings) -> Connection:
    """Connect (starting the embedded server when the settings name no URL): the client, or why there is none."""
    target = describe_target(settings)
    try:
        client = connect(settings)
    except (L1Error, WeaviateSetupError) as exc:
        return Connection(None, _redact(str(exc), settings), target, time.monotonic())
    except BaseException as exc:  # the thread's only result: whatever went wrong is the connection's error
        why = f"cannot reach {target}: {type(exc).__name__}: {exc}"
        return Connection(None, _redact(why, settings), target, time.monotonic())
    return Connection(client, None, target, time.monotonic())


@dataclass(frozen=True)
class Opening:
    """A connection being opened on a thread of its own, so that a page renders while an embedded Weaviate starts
    (seconds on a cold start); a page that needs L1 waits for it (AppContext.conn), the others do not."""

    target: str
    started: float
    future: Future[Connection]
    cold: bool = False  # an embedded server that is started here: nothing serves its port yet
    settings: Settings | None = None  # the settings connected with: another port when the configured one is not ours
    moved: str | None = None  # whose the configured port is, and where ours went (server.place)

    @classmethod
    def start(cls, settings: Settings) -> Opening:
        placed = place(settings)  # never a server of another data directory: ours elsewhere instead
        settings = placed.settings
        cold = not settings.weaviate_url and not port_open("127.0.0.1", settings.embedded_port, 0.2)
        future: Future[Connection] = Future()
        threading.Thread(target=lambda: future.set_result(_open(settings)), name="weaviate-connect", daemon=True).start()
        return cls(describe_target(settings), time.monotonic(), future, cold, settings, placed.note)

    @classmethod
    def of(cls, conn: Connection) -> Opening:
        """A connection that is open (or failed) already."""
        future: Future[Connection] = Future()
        future.set_result(conn)
        return cls(conn.target, conn.opened_at, future)

    def placed(self, settings: Settings) -> Settings:
        """`settings` with the ports (and data directory) this connection was opened with."""
        if self.settings is None:
            return settings
        s = self.settings
        return settings.with_(embedded_port=s.embedded_port, embedded_grpc_port=s.embedded_grpc_port, home_port=s.home_port)

    def peek(self) -> Connection | None:
        """The connection once opened (or failed); None while it is still opening."""
        return self.future.result() if self.future.done() else None

    def wait(self, timeout_s: float | None = None) -> Connection | None:
        """The connection, waiting at most `timeout_s` (None: until it is open or has failed)."""
        with contextlib.suppress(FuturesTimeout):
            return self.future.result(timeout_s)
        return None

    def waited_s(self) -> float:
        return time.monotonic() - self.started


def _opening_still_good(opening: Opening) -> bool:
    conn = opening.peek()
    return True if conn is None else _still_good(conn)


def _release_opening(opening: Opening) -> None:
    conn = opening.peek()
    if conn is None:  # still opening: close it once it is open
        opening.future.add_done_callback(lambda f: _release(f.result()))
    else:
        _release(conn)


@st.cache_resource(show_spinner=False, validate=_opening_still_good, on_release=_release_opening)
def _opening(key: tuple, _settings: Settings) -> Opening:
    return Opening.start(_settings)


def _redact(text: str, settings: Settings) -> str:
    """Error text without the API key or URL credentials, should a library have put them in."""
    for secret in (settings.weaviate_api_key, urlparse(settings.weaviate_url or "").password):
        if secret:
            text = text.replace(secret, "***")
    return text


def opening(settings: Settings) -> Opening:
    """The connection of these settings, opened once per process (in the background) and reused."""
    return _opening(_connection_key(settings), settings)


def connection(settings: Settings) -> Connection:
    """The connection of these settings, waiting for it to open."""
    conn = opening(settings).wait()
    assert conn is not None  # waited without a limit
    return conn


def retry_connection() -> None:
    """Forget every cached connection (and the figures read through it); the next run connects again."""
    _opening.clear()
    store_of.clear()
    st.cache_data.clear()


@st.cache_resource(show_spinner=False)
def store_of(key: tuple, collection: str, model: str, _client: WeaviateClient, _settings: Settings) -> KnowledgeStore:
    """One KnowledgeStore per connection (`key`: its settings and when it was opened), collection and the
    embedding model it is searched with (checked against the collection's own on the first search), opened the
    one way (retrieval.store.factory) with the settings that made the connection."""
    return knowledge_store(_client, _settings, collection=collection, embedding_model=model)


# --- model, corpus, invocation store ---------------------------------------------------------------------------
def _loaded_or_loading(future: Future) -> bool:
    """A load that failed is not kept: the next call loads again (after the model's files were fixed)."""
    return not future.done() or future.exception() is None


@st.cache_resource(show_spinner=False, validate=_loaded_or_loading)
def _model_loading(model: str, model_dir: str | None) -> Future[Embedder]:
    """The embedding model, loading on a thread of its own from the first time a page names it."""
    future: Future[Embedder] = Future()

    def load() -> None:
        try:
            future.set_result(Embedder(model, model_dir=None if model_dir is None else Path(model_dir)))
        except BaseException as exc:  # the caller of embedder() gets it
            future.set_exception(exc)

    threading.Thread(target=load, name="model-load", daemon=True).start()
    return future


def embedder(model: str, model_dir: str | None = None) -> Embedder:
    """The loaded model, once per process; waits for its load (under a spinner when it is not done)."""
    future = _model_loading(model, model_dir)
    if future.done():
        return future.result()
    with st.spinner("Loading the embedding model…", show_time=True):
        return future.result()


@dataclass(frozen=True)
class CorpusIndex:
    corpus: Corpus
    l0: L0Index


@st.cache_resource(show_spinner="Reading the corpus…")
def corpus_index(corpus_dir: str) -> CorpusIndex:
    """Raises CorpusError when the folder is missing (not cached, so fixing it and rerunning works)."""
    corpus = load_corpus(Path(corpus_dir))
    return CorpusIndex(corpus, L0Index(corpus.entries))


def reload_corpus() -> None:
    corpus_index.clear()
    st.cache_data.clear()


def _close_store(store: InvocationStore) -> None:
    store.close()


@st.cache_resource(show_spinner=False, on_release=_close_store)
def invocation_store(db_path: str, memory_limit: str, threads: int) -> InvocationStore:
    store = InvocationStore(Path(db_path), budget=DbBudget(memory_limit, threads))
    store.start_background_flush()
    return store


def clear_all(*, keep_model: bool = True) -> None:
    """Drop every cached resource (closing connections and stores); the model stays unless asked."""
    _opening.clear()
    store_of.clear()
    corpus_index.clear()
    invocation_store.clear()
    if not keep_model:
        _model_loading.clear()
    st.cache_data.clear()


# --- what a page works with ------------------------------------------------------------------------------------
WRITABLE = WriteAccess(False, "")  # the default access: writes allowed, nothing to explain


@dataclass(frozen=True)
class AppContext:
    settings: Settings
    corpus: Corpus
    l0: L0Index
    opening: Opening
    recorder: InvocationStore | None
    recorder_error: str | None
    access: WriteAccess = WRITABLE

    @cached_property
    def conn(self) -> Connection:
        """The Weaviate connection; while it is still opening, waits for it under a spinner that says so."""
        ready = self.opening.peek()
        if ready is not None:
            return ready
        with st.spinner(f"Waiting for {self.opening.target} to start (L1 is needed here)…", show_time=True):
            conn = self.opening.wait()
        assert conn is not None  # waited without a limit
        return conn

    @property
    def l1_starting(self) -> bool:
        """Weaviate is still being connected to (or started) in the background."""
        return self.opening.peek() is None

    @property
    def read_only(self) -> bool:
        """No ingest, re-index or reload from this app, no saved run, no judged set or settings file."""
        return self.access.read_only

    @property
    def records_lookups(self) -> bool:
        """Whether a lookup typed on Lookup is recorded: always when the app may write; in read-only mode only with
        LOOKUP_READ_ONLY_RECORDS (a demo leaves no trace by default)."""
        return not self.access.read_only or self.settings.read_only_records

    @cached_property
    def store(self) -> KnowledgeStore | None:
        """The collection's store, made once per connection and collection (kept across reruns and contexts,
        so what it learns, its fold factor, is kept too); None without a connection."""
        if self.conn.client is None:
            return None
        return store_of(
            (_connection_key(self.settings), self.conn.opened_at),
            self.settings.collection,
            self.settings.embedding_model,
            self.conn.client,
            self.settings,
        )

    @property
    def l1_reason(self) -> str | None:
        return self.conn.error

    def embedder(self) -> Embedder:
        model_dir = self.settings.model_dir
        return embedder(self.settings.embedding_model, None if model_dir is None else str(model_dir))

    def lookup_services(self, *, record: bool = True) -> LookupServices:
        """What lookup_knowledge needs; without a connection it runs on L0 and says why L1 is missing."""
        store = self.store
        model = self.embedder() if store is not None and self.settings.l1_enabled else None
        return LookupServices(
            l0=self.l0,
            embedder=model,
            store=store,
            recorder=self.recorder if record else None,
            l1_unavailable=self.conn.error,
            norms=None if store is None else support_norms(_connection_key(self.settings), self.settings.collection, store),
        )


def context(settings: Settings | None = None) -> AppContext:
    """Open (or reuse) everything for the current settings. Raises LookupLabError for a bad corpus folder."""
    settings = settings or current_settings()
    index = corpus_index(str(Path(settings.corpus_dir).resolve()))
    starting = opening(settings)
    if settings.l1_enabled:  # the model loads beside Weaviate's start, so the first lookup waits for neither
        _model_loading(settings.embedding_model, None if settings.model_dir is None else str(settings.model_dir))
    # A remote or running server answers by now; an embedded one that starts cold takes seconds: it is not waited for
    starting.wait(0.0 if starting.cold else settings.app_l1_wait_s)
    recorder, why = None, None
    try:
        recorder = invocation_store(str(Path(settings.invocation_db).resolve()), settings.db_memory_limit, settings.db_threads)
    except (StoreError, LookupLabError, OSError) as exc:
        why = str(exc)
    access = write_access(settings.read_only, server_address())
    return AppContext(starting.placed(settings), index.corpus, index.l0, starting, recorder, why, access)


def page_context() -> AppContext:
    """The context app.py opened for this run (pages never open their own)."""
    # When app.py did not run, Streamlit ran the page file alone (a deep link such as /corpus, until the process's
    # first st.navigation turns the folder-based fallback off): turn it off and rerun through app.py, so the page
    # gets its frame; should that not help, the page runs without it.
    ctx = st.session_state.pop(keys.CONTEXT, None)
    if isinstance(ctx, AppContext):
        st.session_state.pop(keys.FRAME_RETRY, None)
        return ctx
    if not st.session_state.get(keys.FRAME_RETRY):
        from streamlit.runtime.pages_manager import PagesManager

        st.session_state[keys.FRAME_RETRY] = True
        # Private, and the only switch there is (Streamlit 1.67): PagesManager sets this class flag from the
        # existence of pages/ beside the entrypoint, and only st.navigation clears it; no config option or
        # public call does. The folder stays (the design card names it), so this is the one place it is flipped.
        PagesManager.uses_pages_directory = False
        st.rerun()
    return context()


@st.cache_data(ttl=15, show_spinner=False)
def index_summary(key: tuple, collection: str, _client: Any, _settings: Settings) -> tuple[int | None, int | None, str | None]:
    """(entries fully indexed, chunks, error) of one collection, re-read at most every 15 s."""
    try:
        store = knowledge_store(_client, _settings, collection=collection, embedding_model="")
        return len(store.indexed_entry_ids()), store.count_chunks(), None
    except Exception as exc:
        return None, None, f"{type(exc).__name__}: {exc}"


@st.cache_data(ttl=15, show_spinner=False)
def support_norms(key: tuple, collection: str, _store: KnowledgeStore) -> SupportNorms | None:
    """The collection's support baselines (None: the reference ones), read again at most every 15 s, so a fit made
    by an ingest elsewhere is read."""
    return stored_norms(_store)


def collection_summary(ctx: AppContext) -> tuple[int | None, int | None, str | None]:
    if not ctx.conn.ok:
        return None, None, ctx.conn.error
    return index_summary(_connection_key(ctx.settings), ctx.settings.collection, ctx.conn.client, ctx.settings)


def indexed_state(ctx: AppContext) -> dict[str, tuple[str, int, int]] | None:
    """KnowledgeStore.indexed_state() of the current collection, or None when L1 is unreachable."""
    if ctx.store is None:
        return None
    return ctx.store.indexed_state()
