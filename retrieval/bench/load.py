"""`python -m retrieval bench --load`: N concurrent MCP clients (the SDK's own Client) against `serve`, each making a set
number of lookup_knowledge calls: calls/s, p50/p95/p99, errors by kind, and the calls answered against the rows recorded
in DuckDB after the server stops. Variants: a kill -9 of the server mid-run, and a soak at half the measured rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from retrieval.bench.common import listening_pid, machine_info, pct, write_results
from retrieval.bench.load_report import load_goals, render_load_table
from retrieval.bench.server import EVAL_SETS, _served_env, _start, _stop
from retrieval.config import REPO_ROOT, Settings
from retrieval.core.corpus import load_corpus
from retrieval.engine.ports import free_port
from retrieval.engine.server import connect
from retrieval.errors import LookupLabError
from retrieval.evals.sets import load_eval_set
from retrieval.records.spool import spool_dir_of
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store

TRANSPORTS = ("http", "stdio")
CALL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LoadPlan:
    """What one load run does: `clients` clients of `transport`, `calls` timed calls each (after one warm-up call)."""

    clients: int = 50
    calls: int = 40
    transport: str = "http"
    kill: bool = False
    soak_minutes: float = 0.0

    def check(self) -> None:
        if self.transport not in TRANSPORTS:
            raise LookupLabError(f"--load-transport {self.transport!r}: choose one of {', '.join(TRANSPORTS)}")
        if self.clients < 1 or self.calls < 1 or self.soak_minutes < 0:
            raise LookupLabError(f"--clients {self.clients} and --calls {self.calls} must be positive, --soak-minutes >= 0")
        if self.kill and (self.transport != "http" or self.soak_minutes):
            raise LookupLabError("--kill runs over HTTP alone, without --soak-minutes")


@dataclass
class Tally:
    """The calls of one phase as they happen (mutable while the clients run)."""

    sent: int = 0
    answered: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)

    def figures(self, seconds: float, load_start: float) -> dict[str, Any]:
        p50, p99 = pct(self.latencies_ms, 50), pct(self.latencies_ms, 99)
        return {
            "answered": self.answered,
            "errors": dict(self.errors),
            "seconds": round(seconds, 2),
            "calls_per_s": round(len(self.latencies_ms) / seconds, 1) if seconds > 0 else None,
            "p50_ms": p50,
            "p95_ms": pct(self.latencies_ms, 95),
            "p99_ms": p99,
            "p99_over_p50": round(p99 / p50, 2) if p50 and p99 else None,
            "load_1m_start": load_start,
            "load_1m": load_1m(),
        }


def load_1m() -> float:
    return round(os.getloadavg()[0], 2)


def error_kind(exc: BaseException) -> str:
    """An exception's kind for the error table: its type, or an exception group's first leaf's type."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return type(exc).__name__


async def lookup_call(client: Any, query: str, tally: Tally | None, run: Tally) -> bool:
    """One lookup; `run` counts every call, `tally` (None for a warm-up) the timed ones. False: it failed."""
    run.sent += 1
    t0 = time.perf_counter()
    try:
        result = await client.call_tool("lookup_knowledge", {"query": query}, read_timeout_seconds=CALL_TIMEOUT_S)
    except Exception as exc:
        for t in {id(x): x for x in (tally, run) if x is not None}.values():
            t.errors[error_kind(exc)] += 1
        return False
    ms = (time.perf_counter() - t0) * 1000
    for t in {id(x): x for x in (tally, run) if x is not None}.values():
        if result.is_error:
            t.errors["tool error"] += 1
        else:
            t.answered += 1
    if tally is not None and not result.is_error:
        tally.latencies_ms.append(ms)
    return not result.is_error


def eval_queries() -> list[str]:
    """The queries the clients send: those of the sample corpus's eval sets, in order."""
    return [c.query for name in EVAL_SETS for c in load_eval_set(REPO_ROOT / "eval_sets" / name).cases]


def _opener(plan: LoadPlan, url: str | None, env: dict[str, str], tag: str) -> Callable[[], Any]:
    """A function opening one SDK Client: to the HTTP server's URL, or over stdio to a new serve process of its own."""
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    me = Implementation(name=tag, version="1")  # the server records clientInfo.name as the session tag
    if plan.transport == "http":
        return lambda: Client(url or "", client_info=me)
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrieval", "serve"], env=env, cwd=str(REPO_ROOT))
    return lambda: Client(params, mode="legacy", client_info=me)


class _Phases:
    """The clients' shared schedule: all connect and warm up, then start together; a soak paces calls to a rate."""

    def __init__(self, plan: LoadPlan, queries: list[str]) -> None:
        self.plan, self.queries = plan, queries
        self.run, self.load, self.soak = Tally(), Tally(), Tally()
        self.arrived, self.all_arrived, self.go = 0, asyncio.Event(), asyncio.Event()
        self.loaded, self.all_loaded = 0, asyncio.Event()
        self.stopped = False
        self.soak_rate, self.soak_until, self.soak_t0, self.soak_next = 0.0, 0.0, 0.0, 0
        self.soak_go = asyncio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.plan.clients:
            self.all_arrived.set()

    def finish_load(self) -> None:
        self.loaded += 1
        if self.loaded == self.plan.clients:
            self.all_loaded.set()

    async def client(self, i: int, open_client: Callable[[], Any]) -> None:
        arrived = loaded = False
        try:
            async with open_client() as client:
                await lookup_call(client, self.queries[i % len(self.queries)], None, self.run)
                self.arrive()
                arrived = True
                await self.go.wait()
                for j in range(self.plan.calls):
                    if self.stopped:
                        return
                    query = self.queries[(i * self.plan.calls + j) % len(self.queries)]
                    if not await lookup_call(client, query, self.load, self.run) and self.plan.kill:
                        return
                self.finish_load()
                loaded = True
                if self.plan.soak_minutes:
                    await self.soak_go.wait()
                    await self._soak_calls(client)
        except Exception as exc:  # connecting or closing failed, or (under --kill) the connection was cut
            self.run.errors[f"{'after the kill' if self.stopped else 'client'}: {error_kind(exc)}"] += 1
        finally:
            if not arrived:
                self.arrive()
            if not loaded:
                self.finish_load()

    async def _soak_calls(self, client: Any) -> None:
        while True:
            k = self.soak_next
            self.soak_next += 1
            at = self.soak_t0 + k / self.soak_rate
            if at >= self.soak_until:
                return
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            await lookup_call(client, self.queries[k % len(self.queries)], self.soak, self.run)


def rss_mb(pid: int) -> float | None:
    """The resident memory of process `pid` in MB (Linux /proc), or None when it cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


async def drive(plan: LoadPlan, open_client: Callable[[], Any], queries: list[str], pid: int | None, log) -> dict[str, Any]:
    """Run the clients: warm-up, the timed calls (with the kill, if planned), then the soak; the figures of each."""
    ph = _Phases(plan, queries)
    tasks = [asyncio.create_task(ph.client(i, open_client)) for i in range(plan.clients)]
    await ph.all_arrived.wait()
    log(f"{plan.clients} clients connected and warmed up; {plan.calls} calls each")
    out: dict[str, Any] = {}
    load_start, t0 = load_1m(), time.perf_counter()
    ph.go.set()
    if plan.kill and pid is not None:
        out["kill"] = await _kill_midway(ph, pid, log)
    await ph.all_loaded.wait()
    out["load"] = ph.load.figures(time.perf_counter() - t0, load_start)
    if plan.soak_minutes and out["load"]["calls_per_s"]:
        out["soak"] = await _soak(ph, out["load"]["calls_per_s"] / 2, plan.soak_minutes, pid, log)
    await asyncio.gather(*tasks)
    out["all_calls"] = {"sent": ph.run.sent, "answered": ph.run.answered, "errors": dict(ph.run.errors)}
    return out


async def _kill_midway(ph: _Phases, pid: int, log) -> dict[str, Any]:
    """kill -9 the server once half the timed calls are answered; the calls sent and not yet answered then are in flight."""
    half = ph.plan.clients * ph.plan.calls // 2
    while ph.load.answered < half and not ph.all_loaded.is_set():
        await asyncio.sleep(0.005)
    in_flight = ph.run.sent - ph.run.answered - sum(ph.run.errors.values())
    answered_at_kill = ph.run.answered
    os.kill(pid, signal.SIGKILL)
    ph.stopped = True
    log(f"kill -9 of the server after {answered_at_kill} answered calls, {in_flight} in flight")
    return {"answered_at_kill": answered_at_kill, "in_flight": in_flight, "load_1m": load_1m()}


async def _soak(ph: _Phases, rate: float, minutes: float, pid: int | None, log) -> dict[str, Any]:
    """Calls at `rate` a second for `minutes`, the server's RSS read every minute; growth from minute 2 to the end."""
    load_start = load_1m()
    ph.soak_rate, ph.soak_t0 = rate, time.monotonic()
    ph.soak_until = ph.soak_t0 + minutes * 60
    ph.soak_go.set()
    samples = [{"minute": 0, "rss_mb": rss_mb(pid) if pid else None, "load_1m": load_1m()}]
    log(f"soak: {rate:.1f} calls/s for {minutes} min; server RSS {samples[0]['rss_mb']} MB")
    for minute in range(1, int(minutes) + 1):
        await asyncio.sleep(max(0.0, ph.soak_t0 + minute * 60 - time.monotonic()))
        samples.append({"minute": minute, "rss_mb": rss_mb(pid) if pid else None, "load_1m": load_1m()})
        log(f"soak minute {minute}: server RSS {samples[-1]['rss_mb']} MB, {ph.soak.answered} calls, load {load_1m()}")
    await asyncio.sleep(max(0.0, ph.soak_until - time.monotonic()))
    out = ph.soak.figures(time.monotonic() - ph.soak_t0, load_start)
    base = next((s["rss_mb"] for s in samples if s["minute"] == 2), None)
    end = samples[-1]["rss_mb"]
    growth = round((end - base) / base * 100, 1) if base and end and len(samples) > 3 else None
    return out | {"target_calls_per_s": round(rate, 1), "rss": samples, "rss_growth_pct_from_minute_2": growth}


def recorded(db_path: Path, tag: str) -> dict[str, int]:
    """Rows of `tag` in the DuckDB file (and distinct ids), and rows still waiting in its spool, after the server stopped."""
    spool = spool_dir_of(db_path)
    waiting = (
        sum(len([x for x in f.read_bytes().splitlines() if x.strip()]) for f in spool.glob("*") if f.is_file())
        if spool.is_dir()
        else 0
    )
    if not db_path.exists():
        return {"recorded": 0, "distinct_ids": 0, "waiting_in_spool": waiting}
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        row = con.execute("SELECT count(*), count(DISTINCT id) FROM tool_invocation WHERE session_tag = ?", [tag]).fetchone()
        n, ids = row if row else (0, 0)
    finally:
        con.close()
    return {"recorded": int(n), "distinct_ids": int(ids), "waiting_in_spool": waiting}


def _weaviate_gone(port: int, timeout_s: float = 60.0) -> bool:
    """Whether nothing listens on the embedded Weaviate's port within `timeout_s` (its launcher died, so it should end)."""
    deadline = time.monotonic() + timeout_s
    while listening_pid(port) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def run_load_bench(
    settings: Settings,
    plan: LoadPlan,
    *,
    out_dir: Path = Path("bench/results"),
    log: Callable[[str], None] | None = None,
    client=None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Run `plan` on the sample corpus in a temporary data directory and DuckDB file; write `<time>-bench-load.md` and
    `.json`; return the figures. Without `client` an embedded Weaviate is started (or `settings.weaviate_url` used)."""
    plan.check()
    log = log or (lambda m: None)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="lookup-bench-load-"))
    own = client is None and not settings.weaviate_url
    where = (
        settings.with_(data_dir=workdir / "weaviate", embedded_port=free_port(), embedded_grpc_port=free_port())
        if own
        else settings
    )
    where = where.with_(corpus_dir=REPO_ROOT / "sample_corpus", collection=f"Bench_load_{int(time.time()) % 100_000:05d}")
    tag = f"bench-load-{where.collection[-5:]}"
    queries = eval_queries()
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "plan": vars(plan).copy(),
        "session_tag": tag,
    }
    store = None
    try:
        wclient = client or connect(where)
        result["machine"] = machine_info(wclient)
        store = knowledge_store(wclient, where)
        store.drop()
        corpus = load_corpus(where.corpus_dir)
        log(f"indexing the sample corpus ({len(corpus.entries)} entries) in {where.collection}")
        indexing.ingest(store, corpus, embedder or Embedder(settings.embedding_model, model_dir=settings.model_dir))
        result["entries"] = len(corpus.entries)
        if own and plan.kill:  # the server starts its own Weaviate on the same data, so that its kill can leave one behind
            wclient.close()
        result |= _serve_and_drive(plan, where, workdir, queries, tag, own_weaviate=own and plan.kill, log=log)
        if own and plan.kill:
            wclient = connect(where)
            store = knowledge_store(wclient, where)
        result["goals"] = load_goals(result)
        result["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        result["elapsed_s"] = round(time.perf_counter() - started, 1)
    finally:
        if store is not None:
            with contextlib.suppress(Exception):  # clean-up must not hide the run's own error
                store.drop()
        if own and "wclient" in locals():
            wclient.close()
        shutil.rmtree(workdir, ignore_errors=True)
    result["table"] = render_load_table(result)
    return write_results(result, Path(out_dir), "bench-load", log)


def _serve_and_drive(
    plan: LoadPlan, where: Settings, workdir: Path, queries: list[str], tag: str, *, own_weaviate: bool, log
) -> dict[str, Any]:
    """Start the server(s), drive the clients, stop, count the rows; for --kill, also the restart that moves the spool in."""
    env = _served_env(where, workdir, plan.transport)
    if own_weaviate:
        env["LOOKUP_DATA_DIR"] = str(where.data_dir)
    db_path = Path(env["LOOKUP_DB_PATH"])
    proc: subprocess.Popen | None = None
    url = None
    try:
        if plan.transport == "http":
            port = free_port()
            log(f"starting serve --transport http on port {port}")
            proc = _start(["--transport", "http", "--port", str(port)], env, stdio=False, log_path=workdir / "serve.log")
            url = f"http://127.0.0.1:{port}/mcp"
        out = asyncio.run(drive(plan, _opener(plan, url, env, tag), queries, proc.pid if proc else None, log))
        if proc is not None and not plan.kill:
            out["exit_code"] = _stop(proc)
        if plan.kill and proc is not None:
            proc.wait()
            out["weaviate_left_after_kill"] = not _weaviate_gone(where.embedded_port) if own_weaviate else None
            log("restarting the server: it moves the killed one's spool in")
            proc = _start(["--transport", "http", "--port", str(free_port())], env, stdio=False, log_path=workdir / "serve2.log")
            out["exit_code"] = _stop(proc)
            out["weaviate_left_after_stop"] = not _weaviate_gone(where.embedded_port) if own_weaviate else None
    finally:
        if proc is not None and proc.poll() is None:
            _stop(proc)
    out["records"] = recorded(db_path, tag)
    return out
