"""`python -m retrieval serve` as a real subprocess for the MCP tests, and SDK clients to reach it."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import duckdb
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import Implementation

from retrieval.config import REPO_ROOT, Settings, child_environment


def serve_env(settings: Settings, db_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a server process: the test session's Weaviate and collection, its own DuckDB file."""
    env = child_environment()
    env.update(
        {
            "LOOKUP_CORPUS_DIR": str(settings.corpus_dir),
            "LOOKUP_COLLECTION": settings.collection,
            "LOOKUP_DATA_DIR": str(settings.data_dir),
            "LOOKUP_DB_PATH": str(db_path),
            "LOOKUP_WEAVIATE_PORT": str(settings.embedded_port),
            "LOOKUP_WEAVIATE_GRPC_PORT": str(settings.embedded_grpc_port),
            "LOOKUP_WEAVIATE_BIN_DIR": str(settings.weaviate_bin_dir),
        }
    )
    env.update(extra)
    return env


HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}}  # initialize's params, with a clientInfo


def call_message(i: int, name: str, arguments: dict) -> dict:
    """A tools/call request with id `i`."""
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


class ServedProcess:
    """`python -m retrieval serve ARGS` as a real subprocess: its stderr lines are kept with their time since the
    spawn, `wait_ready` waits for its 'ready:' line. With `pipes` its stdin and stdout are pipes that a test
    speaks JSON-RPC over, one JSON message a line (`send`, `receive`, `initialize`, `call`)."""

    def __init__(self, args: list[str], env: dict[str, str], *, pipes: bool = False) -> None:
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "serve", *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.log: list[tuple[float, str]] = []
        self._out: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self._readers = [threading.Thread(target=self._read_err, daemon=True)]
        if pipes:
            self._readers.append(threading.Thread(target=self._read_out, daemon=True))
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.log.append((time.monotonic() - self.t0, line.decode(errors="replace").rstrip()))

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            self._out.put((time.monotonic() - self.t0, line))

    @property
    def stderr(self) -> str:
        return "\n".join(text for _, text in self.log)

    def logged_at(self, text: str) -> float | None:
        """Seconds from the spawn to the first stderr line holding `text` (None: none yet)."""
        return next((at for at, line in self.log if text in line), None)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.logged_at("ready:") is not None:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode}:\n{self.stderr}")
            time.sleep(0.05)
        raise AssertionError(f"the server was not ready within {timeout} s:\n{self.stderr}")

    # --- with pipes: JSON-RPC lines ---------------------------------------------------------------------------------
    def send(self, message: dict | bytes) -> None:
        self.proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 120.0) -> tuple[float, dict]:
        """(seconds from the spawn, the next message on stdout); every line on the wire must be JSON."""
        try:
            at, line = self._out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s:\n{self.stderr}") from None
        return at, json.loads(line)

    def initialize(self, client: str) -> float:
        """initialize as `client`, then notifications/initialized; seconds from the spawn to the reply."""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {**HELLO, "clientInfo": {"name": client, "version": "1"}},
            }
        )
        at, reply = self.receive()
        assert reply["result"]["serverInfo"]["name"] == "lookup-lab", reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return at

    def call(self, i: int, name: str, arguments: dict) -> tuple[float, dict]:
        self.send(call_message(i, name, arguments))
        return self.receive()

    # --- ending it ---------------------------------------------------------------------------------------------
    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.proc.kill()
            self.proc.wait()
            stopped_by = signal.Signals(sig).name
            raise AssertionError(f"the server did not stop within {timeout} s of {stopped_by}:\n{self.stderr}") from exc
        finally:
            for reader in self._readers:
                reader.join(timeout=5)

    def close_like_the_typescript_sdk(self, grace_s: float = 2.0) -> str:
        """Close stdin, wait grace_s (the SDK's 2 s), SIGTERM, 2 s, SIGKILL (to the server's pid). Returns the step
        that ended it; `closed_after_s` keeps how long the server took to leave after stdin closed."""
        self.proc.stdin.close()
        t0 = time.monotonic()
        try:
            for step, then, wait_s in (("stdin closed", signal.SIGTERM, grace_s), ("SIGTERM", signal.SIGKILL, 2.0)):
                try:
                    self.proc.wait(timeout=wait_s)
                    return step
                except subprocess.TimeoutExpired:
                    self.proc.send_signal(then)
            self.proc.wait(timeout=30)
            return "SIGKILL"
        finally:
            self.closed_after_s = time.monotonic() - t0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@asynccontextmanager
async def http_client(url: str, name: str, *, token: str | None = None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as hc,  # the SDK's timeouts: 30 s, 300 s for a read of the server's stream
        Client(
            streamable_http_client(url, http_client=hc), mode=mode, client_info=Implementation(name=name, version="1")
        ) as client,
    ):
        yield client


def stdio_client(env: dict[str, str], name: str, *, mode: str = "legacy") -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrieval", "serve"], env=env, cwd=str(REPO_ROOT))
    return Client(params, mode=mode, client_info=Implementation(name=name, version="1"))


def stored_rows(db_path: Path, where: str = "true", params: list | None = None) -> list[dict]:
    """Rows of tool_invocation read the way another process reads them: a short read-only connection."""
    for _ in range(200):
        try:
            con = duckdb.connect(str(db_path), read_only=True)
        except duckdb.Error as exc:
            if "lock" in str(exc).lower():
                time.sleep(0.02)
                continue
            raise
        try:
            exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'tool_invocation'").fetchone()[0]
            if not exists:
                return []
            cur = con.execute(
                f"SELECT * EXCLUDE (created_at), CAST(created_at AS VARCHAR) AS created_at FROM tool_invocation WHERE {where}",
                params or [],
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            con.close()
    raise AssertionError(f"{db_path} stayed locked")


def wait_for_rows(db_path: Path, where: str, params: list, n: int = 1, timeout: float = 10.0) -> tuple[list[dict], float]:
    """(rows, seconds until at least n were visible), polling a few times a second like a reader would."""
    t0 = time.monotonic()
    while True:
        rows = stored_rows(db_path, where, params) if db_path.exists() else []
        if len(rows) >= n or time.monotonic() - t0 > timeout:
            return rows, time.monotonic() - t0
        time.sleep(0.1)
