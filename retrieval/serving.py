"""`python -m retrieval serve`: the MCP server's process: transports, signals and authentication.

One process opens the services once (one model load, one Weaviate connection) and answers every client.
SIGTERM or SIGINT stops it cleanly: the calls in flight finish, the invocation spool is flushed into the
DuckDB file, and an embedded Weaviate is stopped if this process started it (one it merely reused is left
running). Over HTTP it listens on 127.0.0.1 unless told otherwise; any other address needs a bearer token
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
from typing import Any

import anyio
import uvicorn

from .api import KnowledgeLookup, open_knowledge_lookup
from .config import Settings
from .embedding import Embedder
from .errors import ServeError
from .mcp_server import build_server
from .stdio_transport import stderr_log, stdio_streams

TRANSPORTS = ("stdio", "http")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
TOKEN_ENV = "LOOKUP_SERVER_TOKEN"
MIN_TOKEN_CHARS = 16
GRACEFUL_SHUTDOWN_S = 3  # open streams are closed after this on SIGTERM


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


def http_app(kb: KnowledgeLookup, *, host: str, token: str | None) -> Any:
    """The Starlette app serving streamable HTTP at /mcp (JSON responses; DNS-rebinding checks on loopback)."""
    app = build_server(kb).streamable_http_app(streamable_http_path=MCP_PATH, json_response=True, host=host)
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
    log: Callable[[str], None] = stderr_log,
) -> None:
    """Run the server until stdin closes (stdio), or SIGTERM/SIGINT. Raises ServeError before loading
    anything when the transport, address or token cannot be used."""
    if transport not in TRANSPORTS:
        raise ServeError(f"--transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    sock = None
    if transport == "http":
        check_bind(host, token)
        sock = bind_socket(host, port)
    opened: list[KnowledgeLookup] = []

    def open_services() -> KnowledgeLookup:
        opened.append(open_knowledge_lookup(settings, embedder=embedder, ingest=ingest, log=log))
        return opened[0]

    try:
        anyio.run(_serve, transport, open_services, sock, host, token, log)
    except BaseExceptionGroup as group:  # the task group wraps what the services raised while opening
        raise _single(group) from None
    finally:
        for kb in opened:  # also when a signal came while the services were opening
            with _signals_ignored():
                kb.close()
        if sock is not None:
            sock.close()
        log("stopped")


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
                    if web is not None:
                        web.should_exit = True
                        web.force_exit = state["signals"] > 1
                    else:
                        state["cancel"].cancel()

        if transport == "stdio":
            # While serving, fd 1 points at stderr: nothing the model or Weaviate prints reaches the wire.
            with anyio.CancelScope() as scope:
                state["cancel"] = scope
                tg.start_soon(watch_signals)
                async with stdio_streams() as (read, write):
                    kb = await anyio.to_thread.run_sync(open_services)
                    server = build_server(kb)
                    log(f"ready: MCP over stdio ({_describe(kb)})")
                    await server.run(read, write, server.create_initialization_options())
        else:
            if sock is None:
                raise ValueError("serving over HTTP needs a bound socket")
            with anyio.CancelScope() as scope:
                state["cancel"] = scope
                tg.start_soon(watch_signals)
                kb = await anyio.to_thread.run_sync(open_services)
                config = uvicorn.Config(
                    http_app(kb, host=host, token=token),
                    log_level="warning",
                    access_log=False,
                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                    lifespan="on",
                )
                web = state["uvicorn"] = _UvicornServer(config)
                tg.start_soon(_announce, web, f"ready: MCP over streamable HTTP at {_url(sock)} ({_describe(kb)})", log)
                await web.serve(sockets=[sock])
        tg.cancel_scope.cancel()  # the signal watcher


class _UvicornServer(uvicorn.Server):
    """uvicorn.Server without its own signal handling: ours (above) stops it, then the services are closed."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


def _single(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _announce(web: Any, message: str, log: Callable[[str], None]) -> None:
    while not web.started and not web.should_exit:
        await anyio.sleep(0.02)
    if web.started:
        log(message)


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


def _describe(kb: KnowledgeLookup) -> str:
    s = kb.settings
    l1 = f"L1 unavailable: {kb.l1_unavailable}" if kb.l1_unavailable else f"collection {s.collection}"
    return f"{len(kb.runtime.corpus.entries)} entries from {s.corpus_dir.name}, {l1}, recording to {s.invocation_db.name}"
