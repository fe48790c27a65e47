"""`python -m retrieval serve`: the MCP server's process: transports, signals and authentication.

One process opens the services once (one model load, one Weaviate connection), in the background: the
protocol is answered at once and calls wait for the services (retrieval.serve.loading). SIGTERM, SIGINT or stdin
closing stops it at any moment: the calls in flight finish, the invocation spool is flushed into the DuckDB
file, and an embedded Weaviate this process started is sent SIGTERM (one it merely reused is left running).
Over HTTP it listens on 127.0.0.1 unless told otherwise; any other address needs a bearer token
(LOOKUP_SERVER_TOKEN), and every request without it is answered 401.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from retrieval.errors import ServeError
from retrieval.records.read_log import ReadLog
from retrieval.serve.loading import DEFAULT_WAIT_S, Loading
from retrieval.serve.mcp_server import build_server
from retrieval.serve.stdio_transport import stderr_log, stdio_streams
from retrieval.store import shutdown

if TYPE_CHECKING:  # the core loads in the background, after the protocol is up
    from retrieval.config import Settings
    from retrieval.serve.api import KnowledgeLookup
    from retrieval.store.embedding import Embedder

TRANSPORTS = ("stdio", "http")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
TOKEN_ENV = "LOOKUP_SERVER_TOKEN"
MIN_TOKEN_CHARS = 16
GRACEFUL_SHUTDOWN_S = 3  # open streams are closed after this on SIGTERM
LOAD_DELAY_MAX_S = 2.0  # stdio: loading starts after the first reply is sent, or after this
STOP_WAIT_S = 1.0  # how long leaving waits for the embedded Weaviate to exit (it then finishes alone)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, token: str | None) -> None:
    """Refuse a bind reachable from other machines without a token, and a token too short to be one."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ServeError(
            f"{TOKEN_ENV} is {len(token)} characters: use at least {MIN_TOKEN_CHARS} "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if not token and not is_loopback(host):
        raise ServeError(
            f"--host {host} is reachable from other machines: set {TOKEN_ENV} to a bearer token that "
            f"clients must send (Authorization: Bearer <token>), or listen on {DEFAULT_HOST}"
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen now, before the model loads, so that a taken port fails at once; early clients queue."""
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port} is not a TCP port (0-65535)")
    # IPPROTO_TCP stated, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without
    # it each answer waited ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(512)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from None
    return sock


class BearerAuth:
    """ASGI wrapper: every HTTP request must carry `Authorization: Bearer <token>`, or gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            got = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(got, self.expected):
                body = json.dumps(
                    {"error": "unauthorized", "error_description": f"send Authorization: Bearer <the server's {TOKEN_ENV}>"}
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="lookup-lab"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(services: KnowledgeLookup | Loading, *, host: str, token: str | None) -> Any:
    """The Starlette app serving streamable HTTP at /mcp (JSON responses; DNS-rebinding checks on loopback)."""
    server = build_server(services, reads=ReadLog())
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, json_response=True, host=host)
    return BearerAuth(app, token) if token else app


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
    """Run the server until stdin closes (stdio), or SIGTERM/SIGINT. The protocol is answered at once; the model
    and Weaviate open in the background (a call waits for them up to `load_wait_s`). Raises ServeError before
    loading anything when the transport, address or token cannot be used, and what opening the services
    raised when they could not be opened."""
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
    """Flush the spool first, then stop the embedded Weaviate this process launched (or is launching: the
    services may still be opening) without waiting long for it: a host kills a server that takes more than
    2 s after closing its stdin. The server, signalled, finishes its shutdown alone (and dies with this
    process anyway: retrieval.store.parent_death); a later start replaces it should it hang."""
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
                import uvicorn

                config = uvicorn.Config(
                    http_app(loading, host=host, token=token),
                    log_level="warning",
                    access_log=False,
                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                    lifespan="on",
                )
                web = state["uvicorn"] = _uvicorn_server(config)
                log(f"listening: MCP over streamable HTTP at {_url(sock)}; loading the model and Weaviate")
                tg.start_soon(load, lambda kb: f"ready: MCP over streamable HTTP at {_url(sock)} ({_describe(kb)})")
                await web.serve(sockets=[sock])
        tg.cancel_scope.cancel()  # the signal watcher and a load still running


def _uvicorn_server(config: Any) -> Any:
    """uvicorn.Server without its own signal handling: ours (in _serve) stops it, then the services are closed."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            yield

    return Server(config)


def _single(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


def _describe(kb: KnowledgeLookup) -> str:
    s = kb.settings
    l1 = f"L1 unavailable: {kb.l1_unavailable}" if kb.l1_unavailable else f"collection {s.collection}"
    return f"{len(kb.runtime.corpus.entries)} entries from {s.corpus_dir.name}, {l1}, recording to {s.invocation_db.name}"
