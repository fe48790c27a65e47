"""`python -m retrieval bench --server`: what the MCP server adds to a lookup, and how many calls a second it answers.
Direct and served calls (HTTP and stdio, same Weaviate and settings, query embeddings cached on both sides) alternate
query by query; the added p50 is served minus direct. Throughput: concurrent HTTP clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from retrieval.bench.common import machine_info, pct, write_results
from retrieval.bench.startup import measure_sdk_startup, measure_startup, render_startup, startup_goals
from retrieval.config import REPO_ROOT, Settings, child_environment
from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.engine.ports import free_port
from retrieval.engine.server import connect
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore
from retrieval.serve.api import KnowledgeLookup
from retrieval.services import Runtime
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.weaviate_store import KnowledgeStore

GOAL_ADDED_MS = 2.0
HANDSHAKE_VERSION = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
EVAL_SETS = ("sample-ops-alerts.yaml", "sample-ops-unanswerable.yaml")


def _initialize(i: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }


def _call(i: int, query: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "lookup_knowledge", "arguments": {"query": query}},
    }


class HttpRpc:
    """A minimal MCP client: one session over one keep-alive HTTP connection (http.client: httpx's own
    request path cost ~1 ms a call here, which is the client's, not the server's)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path, self.n = parts.path, 0
        self.http = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60.0)
        self._reconnect()
        self.headers = dict(ACCEPT)
        status, headers, _ = self._post(_initialize(0))
        if status != 200:
            raise RuntimeError(f"initialize was answered {status}")
        self.headers.update({"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": HANDSHAKE_VERSION})
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(message).encode()
        try:
            self.http.request("POST", self.path, body=body, headers=self.headers)
            r = self.http.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self._reconnect()  # uvicorn closes a connection idle for 5 s; the request never reached it
            self.http.request("POST", self.path, body=body, headers=self.headers)
            r = self.http.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def _reconnect(self) -> None:
        self.http.close()
        self.http.connect()
        self.http.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def lookup(self, query: str) -> dict[str, Any]:
        self.n += 1
        status, _, body = self._post(_call(self.n, query))
        if status != 200:
            raise RuntimeError(f"a bench query was answered {status}: {body[:200]!r}")
        return _checked(json.loads(body))

    def close(self) -> None:
        self.http.close()


class StdioRpc:
    """A minimal MCP client over a server process's stdin/stdout (JSON lines)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        if proc.stdin is None or proc.stdout is None:
            raise ValueError("StdioRpc needs a server process with piped stdin and stdout")
        self.proc, self.n = proc, 0
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self._send(_initialize(0))
        self._receive(0)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message) + "\n")
        self.stdin.flush()

    def _receive(self, i: int) -> dict[str, Any]:
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"the stdio server exited with {self.proc.poll()}")
            message = json.loads(line)
            if message.get("id") == i:
                return message

    def lookup(self, query: str) -> dict[str, Any]:
        self.n += 1
        self._send(_call(self.n, query))
        return _checked(self._receive(self.n))


def _checked(message: dict[str, Any]) -> dict[str, Any]:
    result = message.get("result") or {}
    if "error" in message or result.get("isError"):
        raise RuntimeError(f"the server refused a bench query: {message}")
    return result


def _served_env(settings: Settings, workdir: Path, name: str) -> dict[str, str]:
    """Every setting of the direct lookup, as LOOKUP_* variables, so that both sides do the same lookup (search
    mode included: a served fusion lookup against a direct near_vector one added 2-3 ms that were not the
    server's); only the invocation store is the serve process's own."""
    return child_environment(settings, LOOKUP_DATA_DIR=str(workdir / name), LOOKUP_DB_PATH=str(workdir / f"{name}.duckdb"))


def _start(args: list[str], env: dict[str, str], *, stdio: bool, log_path: Path) -> subprocess.Popen:
    """A serve process; its stderr goes to `log_path`, whose 'ready:' line says it serves."""
    with open(log_path, "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "serve", *args],
            cwd=REPO_ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stderr=log,
        )
    deadline = time.monotonic() + 180
    while "ready:" not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"serve {' '.join(args)} did not start:\n{log_path.read_text()}")
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen) -> int:
    """stdio: close its stdin, as a host does; HTTP: SIGTERM."""
    if proc.stdin:
        proc.stdin.close()
    else:
        proc.terminate()
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
    finally:
        if proc.stdout:
            proc.stdout.close()


def _paired(direct: KnowledgeLookup, served: Callable[[str], Any], queries: list[str], repeats: int) -> dict[str, Any]:
    for q in queries:  # warm both sides' query-embedding caches
        direct.lookup(q)
        served(q)
    d_ms: list[float] = []
    s_ms: list[float] = []

    def timed(call: Callable[[str], Any], q: str, sink: list[float]) -> None:
        t0 = time.perf_counter()
        call(q)
        sink.append((time.perf_counter() - t0) * 1000)

    for i, q in enumerate(queries * repeats):
        steps = ((direct.lookup, d_ms), (served, s_ms))
        for call, sink in steps if i % 2 == 0 else steps[::-1]:
            timed(call, q, sink)
    diffs = [s - d for s, d in zip(s_ms, d_ms, strict=True)]
    d50, s50 = pct(d_ms, 50), pct(s_ms, 50)
    return {
        "calls": len(s_ms),
        "direct_p50_ms": d50,
        "served_p50_ms": s50,
        "served_p95_ms": pct(s_ms, 95),
        "added_p50_ms": None if d50 is None or s50 is None else round(s50 - d50, 3),
        "paired_added_p50_ms": pct(diffs, 50),
    }


def _sdk_client_p50(url: str, queries: list[str], repeats: int) -> float | None:
    """The same calls through the SDK's Client (what an agent host runs), for context."""
    from mcp import Client
    from mcp.types import Implementation

    async def run() -> list[float]:
        async with Client(url, client_info=Implementation(name="bench-sdk", version="1")) as client:
            times = []
            for q in queries * repeats:
                t0 = time.perf_counter()
                await client.call_tool("lookup_knowledge", {"query": q})
                times.append((time.perf_counter() - t0) * 1000)
            return times

    return pct(asyncio.run(run()), 50)


def _throughput(url: str, queries: list[str], clients: int) -> dict[str, Any]:
    sessions = [HttpRpc(url) for _ in range(clients)]
    start = threading.Barrier(clients + 1)

    def work(rpc: HttpRpc) -> int:
        start.wait()
        for q in queries:
            rpc.lookup(q)
        return len(queries)

    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(work, rpc) for rpc in sessions]
        start.wait()
        t0 = time.perf_counter()
        done = sum(f.result() for f in futures)
        seconds = time.perf_counter() - t0
    for rpc in sessions:
        rpc.close()
    return {"clients": clients, "calls": done, "seconds": round(seconds, 2), "calls_per_s": round(done / seconds, 1)}


def run_server_bench(
    settings: Settings,
    *,
    out_dir: Path = Path("bench/results"),
    repeats: int = 3,
    clients: int = 8,
    max_queries: int | None = None,
    log: Callable[[str], None] | None = None,
    client=None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Measure the served lookup against the direct one; write `<date>-bench-server.md` and `.json`; return the figures.
    Without `client`, an embedded Weaviate is started (or `settings.weaviate_url` used); the collection is dropped after."""
    log = log or (lambda m: None)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="lookup-bench-server-"))
    own_client = client is None
    where = (
        settings
        if settings.weaviate_url
        else settings.with_(data_dir=workdir / "weaviate", embedded_port=free_port(), embedded_grpc_port=free_port())
    )
    run_id = f"{int(time.time()) % 100_000:05d}"
    corpus = load_corpus(REPO_ROOT / "sample_corpus")
    queries = [c.query for name in EVAL_SETS for c in load_eval_set(REPO_ROOT / "eval_sets" / name).cases][:max_queries]
    store: KnowledgeStore | None = None
    recorder: InvocationStore | None = None
    procs: list[subprocess.Popen] = []
    try:
        if own_client:
            log("starting Weaviate" if not settings.weaviate_url else f"connecting to {settings.weaviate_url}")
            client = connect(where)
        embedder = embedder or Embedder(settings.embedding_model, model_dir=settings.model_dir)
        where = where.with_(
            corpus_dir=REPO_ROOT / "sample_corpus", collection=f"Bench_server_{run_id}", search_mode="near_vector"
        )
        store = knowledge_store(client, where)
        store.drop()
        log(f"indexing the sample corpus ({len(corpus.entries)} entries) in {where.collection}")
        indexing.ingest(store, corpus, embedder)
        recorder = InvocationStore(workdir / "direct.duckdb")
        recorder.start_background_flush()
        services = LookupServices(l0=L0Index(corpus.entries), embedder=embedder, store=store, recorder=recorder)
        direct = KnowledgeLookup(Runtime(where, corpus, services))
        result: dict[str, Any] = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info(client),
            "queries": len(queries),
            "repeats": repeats,
            "entries": len(corpus.entries),
            "search_mode": where.search_mode,
        }

        result["http"] = _http_figures(direct, where, workdir, queries, repeats, clients, procs, log)
        result["stdio"] = _stdio_figures(direct, where, workdir, queries, repeats, procs, log)
        log("stdio start-up: spawn to initialize, to a first lookup; stdin closed to exit")
        result["startup"] = measure_startup(settings, workdir) | measure_sdk_startup(settings, workdir)

        result["goals"] = _added_goals(result) | startup_goals(result["startup"])
        result["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        result["elapsed_s"] = round(time.perf_counter() - started, 1)
    finally:
        for proc in procs:
            if proc.poll() is None:
                _stop(proc)
        if recorder is not None:
            recorder.close()
        if store is not None:
            with contextlib.suppress(Exception):  # clean-up must not hide the run's own error
                store.drop()
        if own_client and client is not None:
            client.close()  # stops the embedded server we started
        shutil.rmtree(workdir, ignore_errors=True)
    result["table"] = render_server_table(result)
    return write_results(result, Path(out_dir), "bench-server", log)


def _http_figures(
    direct: KnowledgeLookup,
    where: Settings,
    workdir: Path,
    queries: list[str],
    repeats: int,
    clients: int,
    procs: list[subprocess.Popen],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The HTTP server's added time over the direct lookup (calls interleaved), its SDK client's, and its throughput."""
    log("HTTP server: direct and served calls, interleaved")
    port = free_port()
    proc = _start(
        ["--transport", "http", "--port", str(port)],
        _served_env(where, workdir, "http"),
        stdio=False,
        log_path=workdir / "http.log",
    )
    procs.append(proc)
    url = f"http://127.0.0.1:{port}/mcp"
    rpc = HttpRpc(url)
    out = _paired(direct, rpc.lookup, queries, repeats)
    rpc.close()
    out["sdk_client_p50_ms"] = _sdk_client_p50(url, queries, 1)
    log(f"HTTP server: {clients} concurrent clients")
    out["throughput"] = _throughput(url, queries * repeats, clients)
    out["exit_code"] = _stop(proc)
    return out


def _stdio_figures(
    direct: KnowledgeLookup,
    where: Settings,
    workdir: Path,
    queries: list[str],
    repeats: int,
    procs: list[subprocess.Popen],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The stdio server's added time over the direct lookup, calls interleaved."""
    log("stdio server: direct and served calls, interleaved")
    proc = _start(["--transport", "stdio"], _served_env(where, workdir, "stdio"), stdio=True, log_path=workdir / "stdio.log")
    procs.append(proc)
    out = _paired(direct, StdioRpc(proc).lookup, queries, repeats)
    out["exit_code"] = _stop(proc)
    return out


def _added_goals(result: dict[str, Any]) -> dict[str, Any]:
    return {
        f"{t}_server_added_p50_ms": {
            "value": result[t]["added_p50_ms"],
            "goal": f"<= {GOAL_ADDED_MS}",
            "met": result[t]["added_p50_ms"] <= GOAL_ADDED_MS,
        }
        for t in ("http", "stdio")
    }


def render_server_table(result: dict[str, Any]) -> str:
    m, h, s = result["machine"], result["http"], result["stdio"]
    lines = [
        f"Lookup Lab MCP server bench, {result['date']}: {m['cpu']}, {m['cores']} cores, load average "
        f"{m['loadavg_start']} at start, {m.get('loadavg_end')} at end; {result['entries']} entries (sample corpus), "
        f"{result['queries']} queries x {result['repeats']}, {result.get('search_mode', 'near_vector')} lookups with the "
        "same settings on both sides, embeddings cached on both sides, every call recorded on both sides.",
        "",
        "| figure | streamable HTTP | stdio |",
        "|---|---|---|",
    ]
    rows = [
        ("direct lookup p50 ms", "direct_p50_ms"),
        ("served lookup p50 / p95 ms", None),
        ("server added p50 ms (served p50 - direct p50)", "added_p50_ms"),
        ("paired difference p50 ms", "paired_added_p50_ms"),
    ]
    for label, key in rows:
        if key is None:
            lines.append(
                f"| {label} | {h['served_p50_ms']} / {h['served_p95_ms']} | {s['served_p50_ms']} / {s['served_p95_ms']} |"
            )
        else:
            lines.append(f"| {label} | {h[key]} | {s[key]} |")
    t = h["throughput"]
    lines += [
        f"| SDK Client call p50 ms | {h['sdk_client_p50_ms']} | |",
        f"| calls per second, {t['clients']} concurrent clients "
        f"| {t['calls_per_s']} ({t['calls']} calls in {t['seconds']} s) | |",
        f"| exit code after stopping (HTTP: SIGTERM; stdio: stdin closed) | {h['exit_code']} | {s['exit_code']} |",
    ]
    if "startup" in result:
        lines += render_startup(result["startup"])
    lines += [
        "",
        "| goal | value | target | met |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {g['value']} | {g['goal']} | {'yes' if g['met'] else 'NO'} |" for name, g in result["goals"].items()]
    return "\n".join(lines)
