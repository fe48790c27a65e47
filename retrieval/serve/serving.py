"""`python -m retrieval serve`: the MCP server's process: its transport, signals, loading and leaving.
The protocol is answered at once while the services open in the background; over HTTP on an address other than
127.0.0.1 every request needs the bearer token LOOKUP_SERVER_TOKEN (retrieval.serve.http_transport).
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from retrieval.engine import shutdown
from retrieval.errors import ServeError
from retrieval.records.read_log import ReadLog
from retrieval.serve.http_transport import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    TOKEN_ENV,
    bind_socket,
    check_bind,
    url_of,
    uvicorn_server,
)
from retrieval.serve.loading import DEFAULT_WAIT_S, Loading
from retrieval.serve.mcp_server import build_server
from retrieval.serve.stdio_transport import stderr_log, stdio_streams

# The HTTP transport is http_transport's; importers of this module find its TOKEN_ENV here too.
__all__ = ["TOKEN_ENV", "TRANSPORTS", "serve"]

if TYPE_CHECKING:  # the core loads in the background, after the protocol is up
    from retrieval.config import Settings
    from retrieval.serve.api import KnowledgeLookup
    from retrieval.store.embedding import Embedder

TRANSPORTS = ("stdio", "http")
LOAD_DELAY_MAX_S = 2.0  # stdio: loading starts after the first reply is sent, or after this
STOP_WAIT_S = 1.0  # how long leaving waits for the embedded Weaviate to exit (it then finishes alone)


def serve(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    ingest: bool = False,
    embedder: Embedder | None = None,
    load_wait_s: float = DEFAULT_WAIT_S,
    log: Callable[[str], None] = stderr_log,
) -> None:
    """Run the server until stdin closes (stdio), or SIGTERM/SIGINT; a call waits up to `load_wait_s` for the services.
    Raises ServeError, before loading anything, when the transport, address or token cannot be used, and what opening
    the services raised when they could not be opened."""
    if transport not in TRANSPORTS:
        raise ServeError(f"--transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if load_wait_s < 0:
        raise ServeError(f"--load-wait {load_wait_s:g}: must not be negative")
    sock = None
    if transport == "http":
        check_bind(host, token)
        sock = bind_socket(host, port)
    opened: list[KnowledgeLookup] = []
    failed: list[BaseException] = []

    def open_services() -> KnowledgeLookup:
        from retrieval.serve.api import open_knowledge_lookup

        opened.append(open_knowledge_lookup(settings, embedder=embedder, ingest=ingest, log=log))
        return opened[0]

    try:
        anyio.run(_serve, transport, open_services, Loading(load_wait_s), failed, sock, host, token, log)
    except BaseExceptionGroup as group:  # the task group wraps what the services raised while opening
        raise _single(group) from None
    finally:
        with _signals_ignored():
            _leave(opened, log)
        if sock is not None:
            sock.close()
        log("stopped")
    if failed:
        raise failed[0]


def _leave(opened: list[KnowledgeLookup], log: Callable[[str], None]) -> None:
    """Flush the spool, then signal the embedded Weaviate this process launched (or is launching) without waiting long: a
    host kills a server that takes over 2 s after closing its stdin. Weaviate finishes its shutdown alone."""
    for kb in list(opened):
        recorder = kb.runtime.services.recorder
        if recorder is not None:
            try:
                recorder.close()
            except Exception as exc:  # the rows stay in the spool, for the next flush
                log(f"the invocation spool was not flushed: {type(exc).__name__}: {exc}")
    stopped = shutdown.stop_own_servers_soon(STOP_WAIT_S)
    if stopped:
        log(f"told Weaviate (pid {', '.join(map(str, stopped))}) to stop")
    for kb in list(opened):  # the client's connection; the server is signalled already
        kb.close()


@contextlib.contextmanager
def _signals_ignored():
    """Closing flushes the spool and stops Weaviate: a second SIGTERM must not cut that short."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


async def _serve(
    transport: str,
    open_services: Callable[[], KnowledgeLookup],
    loading: Loading,
    failed: list[BaseException],
    sock: socket.socket | None,
    host: str,
    token: str | None,
    log: Callable[[str], None],
) -> None:
    async with anyio.create_task_group() as tg:
        state: dict[str, Any] = {"signals": 0}

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    state["signals"] += 1
                    log(f"{signal.Signals(signum).name}: stopping")
                    web = state.get("uvicorn")
                    if web is not None and loading.kb is not None:
                        web.should_exit = True
                        web.force_exit = state["signals"] > 1
                    else:
                        state["cancel"].cancel()

        async def load(ready_message: Callable[[KnowledgeLookup], str], after: anyio.Event | None = None) -> None:
            """Open the services on a worker thread, which a stop abandons (the process then exits). Over stdio it
            starts once the initialize reply is out (or after LOAD_DELAY_MAX_S): the loading thread's imports hold
            the GIL for seconds, and the host's initialize must not wait behind them."""
            if after is not None:
                with anyio.move_on_after(LOAD_DELAY_MAX_S):
                    await after.wait()
            try:
                kb = await anyio.to_thread.run_sync(open_services, abandon_on_cancel=True)
            except Exception as exc:
                loading.failed(exc)
                failed.append(exc)
                log(f"could not open the services: {type(exc).__name__}: {exc}")
                web = state.get("uvicorn")
                if web is not None:  # a cancelled uvicorn prints its lifespan's traceback: it is asked to stop instead
                    web.should_exit = True
                else:
                    state["cancel"].cancel()
                return
            loading.ready(kb)
            log(ready_message(kb))

        with anyio.CancelScope() as scope:
            state["cancel"] = scope
            tg.start_soon(watch_signals)
            if transport == "stdio":
                # While serving, fd 1 points at stderr: nothing the model or Weaviate prints reaches the wire.
                first_sent = anyio.Event()
                async with stdio_streams(first_sent) as (read, write), anyio.create_task_group() as inner:
                    server = build_server(loading, reads=ReadLog())
                    log("listening: MCP over stdio; loading the model and Weaviate")
                    inner.start_soon(load, lambda kb: f"ready: MCP over stdio ({_describe(kb)})", first_sent)
                    await server.run(read, write, server.create_initialization_options())
                    inner.cancel_scope.cancel()  # stdin closed: a load still running is abandoned
            else:
                if sock is None:
                    raise ValueError("serving over HTTP needs a bound socket")
                web = state["uvicorn"] = uvicorn_server(loading, host=host, token=token)
                log(f"listening: MCP over streamable HTTP at {url_of(sock)}; loading the model and Weaviate")
                tg.start_soon(load, lambda kb: f"ready: MCP over streamable HTTP at {url_of(sock)} ({_describe(kb)})")
                await web.serve(sockets=[sock])
        tg.cancel_scope.cancel()  # the signal watcher and a load still running


def _single(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(kb: KnowledgeLookup) -> str:
    s = kb.settings
    l1 = f"L1 unavailable: {kb.l1_unavailable}" if kb.l1_unavailable else f"collection {s.collection}"
    return f"{len(kb.runtime.corpus.entries)} entries from {s.corpus_dir.name}, {l1}, recording to {s.invocation_db.name}"
