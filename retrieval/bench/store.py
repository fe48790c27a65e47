"""`python -m retrieval bench`, the invocation store: synthetic tool_invocation rows inserted, then the Invocations page's
queries and the Traffic page's reads timed, each part in a child process so that its peak RSS is the store's own.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from retrieval.bench import synthetic
from retrieval.errors import TrafficError
from retrieval.records.dashboard import InvocationFilter, details_for, filter_options, load_dashboard, result_for
from retrieval.records.invocations import InvocationStore, chunk_bytes, insert_rows
from retrieval.records.parts import with_parts
from retrieval.records.schema import ROW_GROUP_ROWS
from retrieval.traffic.estimate import traffic_estimate
from retrieval.traffic.reading import traffic_feature_counts
from retrieval.types.budget import DbBudget

GENERATE_ROWS = 2 * ROW_GROUP_ROWS  # synthetic rows made at a time: ~110 MB of Arrow with 26 KB of JSON a row
FLUSH_ROWS = 16 * GENERATE_ROWS  # rows inserted over one connection
SPAN_DAYS = 30  # the synthetic rows' calls span the last month


class _TimedConnection:
    """Passes calls through to a DuckDB connection, timing each execute until its result is fetched."""

    def __init__(self, con, sink: list[tuple[str, float]]) -> None:
        self._con, self._sink = con, sink

    def execute(self, sql: str, params=None):
        t0 = time.perf_counter()
        res = self._con.execute(sql, params or [])
        if not sql.lstrip().upper().startswith(("SELECT", "WITH", "UNPIVOT", "FROM")):  # run now, nothing to fetch
            self._sink.append((sql, (time.perf_counter() - t0) * 1000))
        return _TimedResult(res, sql, t0, self._sink)

    def __getattr__(self, name):
        return getattr(self._con, name)


class _TimedResult:
    def __init__(self, res, sql, t0, sink) -> None:
        self._res, self._sql, self._t0, self._sink = res, sql, t0, sink

    def _done(self, value):
        self._sink.append((self._sql, (time.perf_counter() - self._t0) * 1000))
        return value

    def df(self):
        return self._done(self._res.df())

    def fetchone(self):
        return self._done(self._res.fetchone())

    def fetchall(self):
        return self._done(self._res.fetchall())


class TimedInvocationStore(InvocationStore):
    """An InvocationStore whose connections time every query the dashboard functions run."""

    def __init__(self, db_path: Path, budget: DbBudget) -> None:
        self.sink: list[tuple[str, float]] = []
        super().__init__(db_path, budget=budget)

    def with_connection(self, fn, **kw):
        return super().with_connection(lambda con: fn(_TimedConnection(con, self.sink)), **kw)


QUERY_NAMES = (
    ("DISTINCT", "options: distinct values"),
    ("max(created_at)), count(*)", "options: range and total"),
    ("count(*) FILTER (WHERE fallback), median", "summary and stage latency"),
    ("ORDER BY created_at DESC", "rows"),
    ("AS bucket, layer", "calls and fallbacks over time"),
    ("UNPIVOT", "stage_samples"),
    ("nullif(domain", "top_domains"),
    ("invocation_keyword", "top_keywords"),
    ("CAST(retrieval_details AS VARCHAR) FROM", "details of one call"),
    ("CAST(result AS VARCHAR) FROM", "result of one call"),
    ("TEMP TABLE invocation_page_ids", "filtered rows: their ids"),
    ("TEMP TABLE invocation_page_rows", "filtered rows: their figures"),
    ("unnest(l0_keywords)", "top_keywords"),
    ("DROP TABLE", "drop the filtered rows"),
)


def _query_name(sql: str) -> str:
    flat = " ".join(sql.split())
    return next((name for key, name in QUERY_NAMES if key in flat), flat[:40])


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    import resource  # no /proc: ru_maxrss (KiB on Linux)

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def insert_synthetic(db_path: Path, templates: pa.Table, rows: int, *, seed: int, budget: DbBudget) -> dict[str, Any]:
    """`rows` synthetic rows (the templates repeated) into a new store, FLUSH_ROWS a connection, GENERATE_ROWS made at a time.
    `insert_rows_per_s` counts the store's time alone (not `generate_s`); `insert_wall_rows_per_s` counts both."""
    store = InvocationStore(db_path, budget=budget)
    templates = with_parts(templates)  # the typed parts a recorder takes from each row
    start_s = time.time() - SPAN_DAYS * 86400
    generate_s = 0.0

    def flush(first: int, con: Any) -> None:
        nonlocal generate_s
        for offset in range(first, min(rows, first + FLUSH_ROWS), GENERATE_ROWS):
            t1 = time.perf_counter()
            count = min(GENERATE_ROWS, rows - offset)
            batch = synthetic.invocation_rows(  # in the order they were recorded: each batch the next slice of the month
                templates,
                count,
                seed=seed + offset,
                start_s=start_s + SPAN_DAYS * 86400 * offset / rows,
                span_days=SPAN_DAYS * count / rows,
                offset=offset,
            )
            generate_s += time.perf_counter() - t1
            insert_rows(con, batch, max_bytes=chunk_bytes(budget))
            del batch

    t0, cpu0 = time.perf_counter(), time.process_time()
    for first in range(0, rows, FLUSH_ROWS):
        store.with_connection(functools.partial(flush, first), read_only=False)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    insert_s = wall_s - generate_s
    return {
        "insert_s": round(insert_s, 2),
        "insert_rows_per_s": round(rows / insert_s),
        "generate_s": round(generate_s, 2),
        "insert_wall_rows_per_s": round(rows / wall_s),
        "insert_cpu_s": round(cpu_s, 1),  # every thread's, generation included: what a shared machine's load hides
        "file_mb": round(db_path.stat().st_size / 2**20, 1),
        "insert_peak_rss_mb": peak_rss_mb(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


TRAFFIC_GOAL_MS = 2000.0  # the Traffic page's reads (and `traffic --json`), warm


def _cases() -> dict[str, InvocationFilter]:
    """The windows both pages are timed on."""
    return {
        "all rows": InvocationFilter(),
        "last 24 h": InvocationFilter(since=datetime.fromtimestamp(time.time() - 86400, UTC)),
        "one session + text": InvocationFilter(session_tags=("run-03",), text="latency"),
    }


def time_traffic(db_path: Path, *, budget: DbBudget, repeats: int = 3) -> dict[str, Any]:
    """The Traffic page's reads (as app_support.traffic_view.read_traffic and `traffic --json`: the estimate and the
    feature counts on one connection) per window: the first run, then the median of `repeats` warm runs."""
    store = InvocationStore(db_path, budget=budget)
    first: dict[str, float] = {}
    warm: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    for label, flt in _cases().items():
        for run in range(repeats + 1):
            t1 = time.perf_counter()
            try:
                with store.reading():
                    n = traffic_estimate(store, flt).overall.calls
                    traffic_feature_counts(store, flt)
            except TrafficError:  # an empty window: the page says so, after the same checks
                n = 0
            ms = (time.perf_counter() - t1) * 1000
            if run == 0:
                first[label], calls[label] = round(ms, 1), n
            else:
                warm.setdefault(label, []).append(ms)
    warm_ms = {k: round(statistics.median(v), 1) for k, v in warm.items()}
    return {
        "traffic_first_ms": first,
        "traffic_warm_ms": warm_ms,
        "traffic_calls": calls,
        "traffic_max_ms": max(warm_ms.values(), default=None),
        "traffic_goal_ms": TRAFFIC_GOAL_MS,
        "traffic_peak_rss_mb": peak_rss_mb(),
        "traffic_loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def time_queries(db_path: Path, *, budget: DbBudget, repeats: int = 3) -> dict[str, Any]:
    """Each case is the Invocations page as a user loads it: filter options, every frame of the dashboard, and
    the result and retrieval_details of the call picked in the table."""
    store = TimedInvocationStore(db_path, budget)
    cases = _cases()
    timed: dict[str, dict[str, list[float]]] = {}
    calls: dict[str, list[float]] = {}
    for label, flt in cases.items():
        for _ in range(repeats):
            store.sink.clear()
            t1 = time.perf_counter()
            with store.reading():  # as pages/invocations.py: one connection for the page
                filter_options(store)
                dash = load_dashboard(store, flt)
                if not dash.rows.empty:  # the page reads the call the user picks
                    result_for(store, dash.rows["id"].iloc[-1])
                    details_for(store, dash.rows["id"].iloc[-1])
            calls.setdefault(label, []).append((time.perf_counter() - t1) * 1000)
            for sql, ms in store.sink:
                timed.setdefault(label, {}).setdefault(_query_name(sql), []).append(ms)
            if calls[label][-1] > 5000:
                break  # far over the goal already: one run says enough
    per_query = {label: {name: round(statistics.median(v), 1) for name, v in qs.items()} for label, qs in timed.items()}
    return {
        "call_ms": {k: round(statistics.median(v), 1) for k, v in calls.items()},
        "page_load_ms": round(statistics.median(calls["all rows"]), 1),
        "query_ms": per_query,
        "runs": {k: len(v) for k, v in calls.items()},
        "query_max_ms": max((ms for qs in per_query.values() for ms in qs.values()), default=None),
        "queries_peak_rss_mb": peak_rss_mb(),
    }


def _child(args: list[str]) -> dict[str, Any]:
    """Run `python -m retrieval.bench.store ARGS` and return the JSON it prints last."""
    package_root = str(Path(__file__).resolve().parents[2])  # a checkout runs without being installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval.bench.store", *args], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench_store {args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"bench_store {args[0]} printed no figures: {proc.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def bench_invocation_store(
    recorder: InvocationStore,
    workdir: Path,
    rows: int,
    *,
    seed: int,
    log: Callable[[str], None],
    budget: DbBudget | None = None,
    repeats: int = 3,
) -> dict[str, Any]:
    """The insert of `rows` synthetic rows (real recorded rows repeated) and the Invocations page's queries on
    them, each in a child process that reports its own peak RSS."""
    budget = budget or recorder.budget
    templates = pa.Table.from_pandas(
        recorder.query(
            "SELECT tool_name, input, status, layer, CAST(result AS VARCHAR) AS result, CAST(retrieval_details AS VARCHAR) "
            "AS retrieval_details, error, domain, l1_status, fallback, top_entry_id FROM tool_invocation"
        ),
        preserve_index=False,
    )
    template_path, db_path = workdir / "invocation-templates.parquet", workdir / "dashboard.duckdb"
    pq.write_table(templates, template_path)
    common = ["--memory-limit", budget.memory_limit, "--threads", str(budget.threads)]
    log(f"invocation store: inserting {rows} rows from {templates.num_rows} recorded ones (DuckDB within {budget.memory_limit})")
    inserted = _child(["insert", str(db_path), str(template_path), str(rows), str(seed), *common])
    log(
        f"invocation store: {inserted['insert_rows_per_s']:,} rows/s ({inserted['insert_cpu_s']} CPU-s), "
        f"peak RSS {inserted['insert_peak_rss_mb']} MB, load {inserted['loadavg']}"
    )
    queried = _child(["queries", str(db_path), str(repeats), *common])
    log(f"invocation store: Invocations page {queried['call_ms']} ms; timing the Traffic page's reads")
    traffic = _child(["traffic", str(db_path), str(repeats), *common])
    log(
        f"invocation store: Traffic page warm {traffic['traffic_warm_ms']} ms (goal {TRAFFIC_GOAL_MS:g} ms), "
        f"peak RSS {traffic['traffic_peak_rss_mb']} MB, load {traffic['traffic_loadavg']}"
    )
    return {"rows": rows, "templates": templates.num_rows, "memory_limit": budget.memory_limit, **inserted, **queried, **traffic}


def main(argv: list[str]) -> None:
    """insert DB TEMPLATES ROWS SEED | queries DB REPEATS | traffic DB REPEATS, then --memory-limit M --threads N;
    prints JSON."""
    budget = DbBudget(argv[argv.index("--memory-limit") + 1], int(argv[argv.index("--threads") + 1]))
    if argv[0] == "insert":
        figures = insert_synthetic(Path(argv[1]), pq.read_table(argv[2]), int(argv[3]), seed=int(argv[4]), budget=budget)
    elif argv[0] == "traffic":
        figures = time_traffic(Path(argv[1]), budget=budget, repeats=int(argv[2]))
    else:
        figures = time_queries(Path(argv[1]), budget=budget, repeats=int(argv[2]))
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1:])
