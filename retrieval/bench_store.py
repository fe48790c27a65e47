"""`python -m retrieval bench`, the invocation store: the Invocations page's DuckDB queries on many synthetic
tool_invocation rows, each query timed on its own."""

from __future__ import annotations

import functools
import statistics
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import synthetic
from .dashboard import InvocationFilter, details_for, filter_options, load_dashboard
from .invocations import InvocationStore, insert_rows


class _TimedConnection:
    """Passes calls through to a DuckDB connection, timing each execute until its result is fetched."""

    def __init__(self, con, sink: list[tuple[str, float]]) -> None:
        self._con, self._sink = con, sink

    def execute(self, sql: str, params=None):
        t0 = time.perf_counter()
        res = self._con.execute(sql, params or [])
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


def _insert_table(table: pa.Table, con: Any) -> int:
    """Insert an Arrow table of invocation rows through one connection; the rows added."""
    con.register("batch", table)
    return insert_rows(con, "batch")


class TimedInvocationStore(InvocationStore):
    """An InvocationStore whose connections time every query the dashboard functions run."""

    def __init__(self, db_path: Path) -> None:
        self.sink: list[tuple[str, float]] = []
        super().__init__(db_path)

    def with_connection(self, fn, **kw):
        return super().with_connection(lambda con: fn(_TimedConnection(con, self.sink)), **kw)


QUERY_NAMES = (
    ("DISTINCT", "options: distinct values"),
    ("max(created_at)), count(*)", "options: range and total"),
    ("count(*) FILTER (WHERE fallback), median", "summary"),
    ("ORDER BY created_at DESC", "rows"),
    ("AS bucket, layer", "calls_over_time"),
    ("quantile_cont(l0_ms", "stage_latency"),
    ("UNPIVOT", "stage_samples"),
    ("AS fallbacks", "fallback_over_time"),
    ("coalesce(domain", "top_domains"),
    ("invocation_keyword", "top_keywords"),
    ("CAST(retrieval_details AS VARCHAR) FROM", "details of one call"),
)


def _query_name(sql: str) -> str:
    flat = " ".join(sql.split())
    return next((name for key, name in QUERY_NAMES if key in flat), flat[:40])


def bench_invocation_store(
    recorder: InvocationStore, workdir: Path, rows: int, *, seed: int, log: Callable[[str], None], repeats: int = 3
) -> dict[str, Any]:
    """The Invocations page's queries on `rows` synthetic tool_invocation rows (real recorded rows repeated)."""
    templates = pa.Table.from_pandas(
        recorder.query(
            "SELECT tool_name, input, status, layer, CAST(result AS VARCHAR) AS result, CAST(retrieval_details AS VARCHAR) "
            "AS retrieval_details, error, domain, l1_status, fallback, top_entry_id FROM tool_invocation"
        ),
        preserve_index=False,
    )
    store = TimedInvocationStore(workdir / "dashboard.duckdb")
    log(f"invocation store: inserting {rows} rows from {templates.num_rows} recorded ones")
    start_s = time.time() - 30 * 86400
    t0 = time.perf_counter()
    for offset in range(0, rows, 100_000):
        batch = synthetic.invocation_rows(
            templates, min(100_000, rows - offset), seed=seed + offset, start_s=start_s, offset=offset
        )
        store.with_connection(functools.partial(_insert_table, batch), read_only=False)
    insert_s = time.perf_counter() - t0
    size_mb = (workdir / "dashboard.duckdb").stat().st_size / 2**20
    cases = {
        "all rows": InvocationFilter(),
        "last 24 h": InvocationFilter(since=datetime.fromtimestamp(time.time() - 86400, UTC)),
        "one session + text": InvocationFilter(session_tags=("run-03",), text="latency"),
    }
    timed: dict[str, dict[str, list[float]]] = {}
    calls: dict[str, list[float]] = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The inplace keyword")  # raised inside duckdb's df() on pandas 3.1
        for label, flt in [("filter_options", None), *cases.items()]:
            for _ in range(repeats):
                store.sink.clear()
                t1 = time.perf_counter()
                if flt is None:
                    filter_options(store)
                else:
                    dash = load_dashboard(store, flt)
                    if not dash.rows.empty:  # the page reads the details of the row the user picks
                        details_for(store, dash.rows["id"].iloc[-1])
                calls.setdefault(label, []).append((time.perf_counter() - t1) * 1000)
                for sql, ms in store.sink:
                    timed.setdefault(label, {}).setdefault(_query_name(sql), []).append(ms)
                if calls[label][-1] > 5000:
                    break  # far over the goal already: one run says enough
    per_query = {label: {name: round(statistics.median(v), 1) for name, v in qs.items()} for label, qs in timed.items()}
    return {
        "rows": rows,
        "templates": templates.num_rows,
        "insert_s": round(insert_s, 2),
        "insert_rows_per_s": round(rows / insert_s),
        "file_mb": round(size_mb, 1),
        "call_ms": {k: round(statistics.median(v), 1) for k, v in calls.items()},
        "query_ms": per_query,
        "runs": {k: len(v) for k, v in calls.items()},
        "query_max_ms": max((ms for qs in per_query.values() for ms in qs.values()), default=None),
    }
