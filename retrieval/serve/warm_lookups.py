"""The standing server's keeper with warm lookups (`python -m retrieval server start` runs it): it holds the embedded
Weaviate and answers lookups for its own settings on a Unix socket, with the corpus, model and connection opened once;
the corpus is reread when its files change, and lookups are recorded to the spool as a CLI call's are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socketserver
import sys
import threading
from pathlib import Path
from typing import Any

from retrieval.config import Settings, load_settings
from retrieval.core.corpus import corpus_signature, load_corpus
from retrieval.core.hints import L0Index
from retrieval.engine.standing import keep
from retrieval.errors import LookupLabError
from retrieval.serve.api import KnowledgeLookup
from retrieval.serve.warm_client import PROTOCOL, settings_fingerprint, socket_path
from retrieval.services import open_runtime, stored_norms

OPEN_WAIT_S = 90.0  # a call that arrives while the services open waits this long (the caller waits longer)


class WarmLookups:
    """The keeper's open services and the answers it gives. Thread-safe: each connection has its own thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.fingerprint = settings_fingerprint(settings)
        self._kb: KnowledgeLookup | None = None
        self._signature = ""
        self._opened = threading.Event()
        self._open_error: str | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open the corpus, L0 index, model, Weaviate connection and spool (in the background, once)."""
        try:
            signature = corpus_signature(self.settings.corpus_dir)
            runtime = open_runtime(self.settings, record="spool-each", log=lambda m: print(m, flush=True))
            kb = KnowledgeLookup(runtime, fit_recheck_s=0.0)  # a CLI call waits on its process start, not on this
            if runtime.services.embedder is not None:
                runtime.services.embedder.embed_query("warm-up")  # the first inference builds onnxruntime's kernels
            with self._lock:
                self._kb, self._signature = kb, signature
            print(f"warm lookups ready: {len(runtime.corpus.entries)} entries", flush=True)
        except Exception as exc:
            self._open_error = f"{type(exc).__name__}: {exc}"
            print(f"warm lookups not available: {self._open_error}", file=sys.stderr, flush=True)
        finally:
            self._opened.set()

    def answer(self, request: Any) -> dict[str, Any]:
        """The reply to one request: {"result": lookup JSON}, {"refused": why} or {"error": message, "kind": class}."""
        if not isinstance(request, dict) or request.get("protocol") != PROTOCOL:
            return {"refused": f"the standing server speaks protocol {PROTOCOL}"}
        if request.get("settings") != self.fingerprint:
            return {"refused": "the standing server was started with other settings"}
        query, session_tag = request.get("query"), request.get("session_tag")
        if not isinstance(query, str):
            return {"error": f"query must be text, got {type(query).__name__}", "kind": "QueryError"}
        if not self._opened.wait(OPEN_WAIT_S):
            return {"refused": "the standing server is still opening its services"}
        kb = self._current()
        if kb is None:
            return {"refused": f"the standing server could not open its services: {self._open_error}"}
        try:
            result = kb.lookup(query, session_tag=session_tag if isinstance(session_tag, str) else None)
        except LookupLabError as exc:
            return {"error": str(exc), "kind": type(exc).__name__}
        return {"result": result.to_dict()}

    def close(self) -> None:
        with self._lock:
            kb, self._kb = self._kb, None
        if kb is not None:
            kb.close()

    def _current(self) -> KnowledgeLookup | None:
        """The open services, with the corpus read again if its files changed since it was read (the connection,
        model and spool are kept)."""
        with self._lock:
            kb = self._kb
            if kb is None:
                return None
            signature = corpus_signature(self.settings.corpus_dir)
            if signature != self._signature:
                corpus = load_corpus(self.settings.corpus_dir)
                store = kb.runtime.services.store  # and the support fit an ingest of the changed corpus keeps
                services = dataclasses.replace(kb.runtime.services, l0=L0Index(corpus.entries), norms=stored_norms(store))
                runtime = dataclasses.replace(kb.runtime, corpus=corpus, services=services)
                self._kb, self._signature = KnowledgeLookup(runtime, fit_recheck_s=0.0), signature
                print(f"corpus changed: {len(corpus.entries)} entries read again", flush=True)
            return self._kb


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline()
        try:
            reply = self.server.warm.answer(json.loads(line))
        except ValueError:
            reply = {"refused": "the request was not JSON"}
        except Exception as exc:
            reply = {"refused": f"the standing server failed: {type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):  # a caller gone mid-call
            self.wfile.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True  # a call in flight does not hold the keeper when it is told to stop

    def __init__(self, path: Path, warm: WarmLookups) -> None:
        self.warm = warm
        super().__init__(str(path), _Handler)


def serve_warm_lookups(settings: Settings) -> None:
    """Answer lookups on the settings' socket until the process is signalled (run by the keeper while it holds the
    server); the socket file is removed and the services closed on the way out."""
    path = socket_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # left by a keeper that was killed: the data directory's lock says none runs now
    warm = WarmLookups(settings)
    mask = os.umask(0o177)  # the socket is made the user's alone (0600) as it is bound: no moment open to others
    try:
        server = _Server(path, warm)
    finally:
        os.umask(mask)
    threading.Thread(target=warm.open, name="warm-open", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        path.unlink(missing_ok=True)
        warm.close()


if __name__ == "__main__":
    settings = load_settings()
    keep(settings, while_up=lambda: serve_warm_lookups(settings))
