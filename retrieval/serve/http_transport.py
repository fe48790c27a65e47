"""MCP's streamable HTTP transport: the listening socket, bound before anything loads; the bearer-token check
required off loopback (LOOKUP_SERVER_TOKEN), every request without it answered 401; and the uvicorn server
that serves /mcp, stopped by the process's own signal handling (retrieval.serve.serving)."""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrieval.errors import ServeError
from retrieval.records.read_log import ReadLog
from retrieval.serve.mcp_server import build_server

if TYPE_CHECKING:
    from retrieval.serve.api import KnowledgeLookup
    from retrieval.serve.loading import Loading

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


def http_app(services: KnowledgeLookup | Loading, *, host: str, token: str | None) -> Any:
    """The Starlette app serving streamable HTTP at /mcp (JSON responses; DNS-rebinding checks on loopback)."""
    server = build_server(services, reads=ReadLog())
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, json_response=True, host=host)
    return BearerAuth(app, token) if token else app


def uvicorn_server(services: KnowledgeLookup | Loading, *, host: str, token: str | None) -> Any:
    """The uvicorn server of `http_app`, without uvicorn's own signal handling: the caller's stops it (through
    `should_exit`), then closes the services."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            yield

    config = uvicorn.Config(
        http_app(services, host=host, token=token),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        lifespan="on",
    )
    return Server(config)


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"
