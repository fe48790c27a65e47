"""The invocations dashboard: filters as data (`InvocationFilter.where()` -> (sql, params)), and every frame the page
draws, read over one short-lived read-only connection from typed columns and child tables, never every row's JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import duckdb
import pandas as pd

from retrieval.core.text import STOPWORDS, tokens
from retrieval.errors import StoreError
from retrieval.records.db_budget import duckdb_frames
from retrieval.records.invocations import COLUMNS, STAGES, InvocationStore
from retrieval.records.rollup import histogram_figures, term_sql, top_keywords_sql
from retrieval.records.schema import KEYWORDS_COLUMN

# Over every row of a bigger store, the page reads the rollups (retrieval.records.rollup): counts stay exact, the
# latency quantiles come from 1%-wide histogram buckets (approximate, within 0.5%); up to this many rows it scans.
EXACT_QUANTILES_UP_TO = 200_000
# The first hour of the newest hours that together hold at least `?` calls (every hour, when the store holds fewer):
# the newest rows are all at or after it, so the page's rows query skips the row groups before it (zone maps).
_NEWEST_HOURS_SQL = (
    "SELECT min(hour) FROM (SELECT hour, sum(calls) OVER (ORDER BY hour DESC) - calls AS newer FROM "
    "(SELECT hour, sum(calls) AS calls FROM invocation_hourly GROUP BY hour)) WHERE newer < ?"
)
SAMPLE_CALLS = 2000  # calls drawn (at random, repeatably) for the per-stage distribution chart
SAMPLE_VECTORS = 32  # over every row of a store past EXACT_QUANTILES_UP_TO, they are drawn from about this many vectors
# What people read first: when, what was asked, which layer answered, the top entry, how long; the id last.
ROW_COLUMNS = (
    "created_at",
    "input",
    "layer",
    "top_entry_id",
    "latency_ms",
    "domain",
    "fallback",
    "l1_status",
    "status",
    "session_tag",
    "error",
    "id",
)
# A filtered page reads its rows in two steps: the row ids that match (the filter's columns alone), then what
# the figures and charts read of those rows; the table shows the newest of them, read last. In one statement the
# filter and every column were read together over all the row groups: 200-330 ms at 1M rows, where the steps take
# 20, 80 and 7 ms.
_MATCHED_IDS = "invocation_page_ids"
_MATCHED = "invocation_page_rows"
_MATCHED_COLUMNS = (
    "id",
    "created_at",
    "layer",
    "fallback",
    "latency_ms",
    "domain",
    *(f"{s}_ms" for s in STAGES),
    KEYWORDS_COLUMN,
)


@dataclass(frozen=True)
class InvocationFilter:
    """What the Invocations page filters on; empty tuples mean "any"."""

    since: datetime | None = None
    until: datetime | None = None
    layers: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    session_tags: tuple[str, ...] = ()
    fallback_only: bool = False
    text: str = ""

    def where(self) -> tuple[str, list[Any]]:
        """The WHERE clause (without the keyword) and its parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.since is not None:
            clauses.append("created_at >= CAST(? AS TIMESTAMPTZ)")
            params.append(_iso(self.since))
        if self.until is not None:
            clauses.append("created_at < CAST(? AS TIMESTAMPTZ)")
            params.append(_iso(self.until))
        for column, values in (
            ("layer", self.layers),
            ("domain", self.domains),
            ("status", self.statuses),
            ("session_tag", self.session_tags),
        ):
            if values:
                clauses.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if self.fallback_only:
            clauses.append("fallback")
        if self.text.strip():
            clauses.append("contains(lower(input), lower(?))")  # a plain substring: no LIKE wildcards
            params.append(self.text.strip())
        return (" AND ".join(clauses) or "TRUE"), params


@dataclass(frozen=True)
class FilterOptions:
    """The values each filter can take, read from the store."""

    layers: tuple[str, ...]
    domains: tuple[str, ...]
    statuses: tuple[str, ...]
    session_tags: tuple[str, ...]
    first: datetime | None
    last: datetime | None
    total: int


@dataclass(frozen=True)
class Dashboard:
    total: int  # calls matching the filter
    fallbacks: int
    median_latency_ms: float | None
    rows: pd.DataFrame  # newest first, up to the row limit (retrieval_details: see details_for)
    calls_over_time: pd.DataFrame  # bucket, layer, calls
    stage_latency: pd.DataFrame  # stage, calls, p50_ms, p95_ms, mean_ms, over every matching call
    stage_samples: pd.DataFrame  # id, stage, ms of up to SAMPLE_CALLS matching calls (for a distribution chart)
    fallback_over_time: pd.DataFrame  # bucket, calls, fallbacks, rate
    top_domains: pd.DataFrame  # domain, calls
    top_keywords: pd.DataFrame  # keyword, field, calls
    bucket: str  # minute | hour | day
    quantiles_approximate: bool = False  # median and p50/p95 read from the rollup's histogram (within 0.5%)

    @property
    def fallback_rate(self) -> float | None:
        return self.fallbacks / self.total if self.total else None

    # the top keywords that `telling` keeps (keyword, field, calls), and those of top_keywords it leaves out
    telling_keywords: pd.DataFrame = dataclasses.field(
        default_factory=lambda: pd.DataFrame(columns=["keyword", "field", "calls"])
    )
    hidden_keywords: tuple[str, ...] = ()
    unrouted: int = 0  # calls routed to no domain (no L0 domain, or several): not in top_domains


KEYWORD_POOL = 5  # keyword rows read per keyword shown, so that top_n telling ones remain after `telling`


def telling(term: str, field: str | None) -> bool:
    """Whether a matched keyword says something on a chart of the most matched ones: not made of L0's stop words
    alone, and not a single word of a title or file name ("Set" of StatefulSet, "out" of OutOfSpace), which L0 matches
    in many queries while it tells little. Phrases, curated keywords, entities and domains always count."""
    keys = tokens(term)
    if not keys or all(k in STOPWORDS for k in keys):
        return False
    return not (len(keys) == 1 and field in ("title", "name"))


def _triples(values) -> list[tuple]:
    return [tuple(values[i : i + 3]) for i in range(0, len(values), 3)]


def _iso(moment: datetime) -> str:
    """ISO text for a bound timestamp (a naive datetime is taken as UTC); DuckDB casts it to TIMESTAMPTZ."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


# Reading TIMESTAMPTZ scalars into Python needs pytz; UTC as naive TIMESTAMP, made aware here, does not.
_UTC = "timezone('UTC', {})"


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def pick_bucket(first: datetime | None, last: datetime | None) -> str:
    """A time bucket that gives a readable number of bars for the span."""
    if first is None or last is None:
        return "hour"
    span = last - first
    if span <= timedelta(hours=3):
        return "minute"
    if span <= timedelta(days=7):
        return "hour"
    return "day"


T = TypeVar("T")


def _read(store: InvocationStore, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    with contextlib.suppress(Exception):  # rows still in the spool show on a later read
        store.flush(timeout_s=2.0)
    with duckdb_frames():
        return store.with_connection(fn, read_only=True)


def _one_row(cursor: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The row of an aggregate query, which always has one."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("an aggregate query over tool_invocation returned no row")
    return row


_LATENCY_COLUMNS = ["stage", "calls", "p50_ms", "p95_ms", "mean_ms"]
Summary = tuple[int, int, float | None, datetime | None, datetime | None, pd.DataFrame]


def _scanned_summary(con: duckdb.DuckDBPyConnection, table: str) -> Summary:
    """The figures and exact per-stage p50/p95 of the rows of `table`, in one scan."""
    aggregates = ", ".join(f"count({s}_ms), quantile_cont({s}_ms, [0.5, 0.95]), avg({s}_ms)" for s in STAGES)
    total, fallbacks, median, first, last, *figures = _one_row(
        con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE fallback), median(latency_ms), {_UTC.format('min(created_at)')}, "
            f"{_UTC.format('max(created_at)')}, {aggregates} FROM {table}"
        )
    )
    latency = pd.DataFrame(
        [(s, int(n), q[0], q[1], mean) for s, (n, q, mean) in zip(STAGES, _triples(figures), strict=True) if n],
        columns=_LATENCY_COLUMNS,
    )
    return int(total), int(fallbacks), None if median is None else float(median), _aware(first), _aware(last), latency


def _rollup_summary(con: duckdb.DuckDBPyConnection, exact_up_to: int) -> Summary | None:
    """The same figures over every row from the rollups (exact counts, approximate quantiles, exact means), or
    None when the store holds no more than `exact_up_to` rows (a scan of them is quick and exact)."""
    total, fallbacks, first, last = _one_row(
        con.execute(
            f"SELECT coalesce(sum(calls), 0), coalesce(sum(fallbacks), 0), {_UTC.format('min(first_at)')}, "
            f"{_UTC.format('max(last_at)')} FROM invocation_hourly"
        )
    )
    if int(total) <= exact_up_to:
        return None
    figures = histogram_figures(con)
    median = figures["latency"][1][0] if "latency" in figures else None
    latency = pd.DataFrame(
        [(s, figures[s][0], figures[s][1][0], figures[s][1][1], figures[s][2]) for s in STAGES if s in figures],
        columns=_LATENCY_COLUMNS,
    )
    return int(total), int(fallbacks), median, _aware(first), _aware(last), latency


def filter_options(store: InvocationStore) -> FilterOptions:
    def run(con: duckdb.DuckDBPyConnection) -> FilterOptions:
        def distinct(column: str) -> tuple[str, ...]:
            rows = con.execute(f"SELECT DISTINCT {column} FROM tool_invocation WHERE {column} IS NOT NULL ORDER BY 1").fetchall()
            return tuple(str(r[0]) for r in rows)

        first, last, total = _one_row(  # the hourly rollup holds the exact first and last call and the count
            con.execute(
                f"SELECT {_UTC.format('min(first_at)')}, {_UTC.format('max(last_at)')}, coalesce(sum(calls), 0) "
                "FROM invocation_hourly"
            )
        )
        layers = con.execute("SELECT DISTINCT layer FROM invocation_hourly ORDER BY 1").fetchall()
        return FilterOptions(
            tuple(str(r[0]) for r in layers),
            distinct("domain"),
            distinct("status"),
            distinct("session_tag"),
            _aware(first),
            _aware(last),
            int(total),
        )

    return _read(store, run)


def load_dashboard(
    store: InvocationStore,
    flt: InvocationFilter,
    *,
    row_limit: int = 500,
    top_n: int = 10,
    bucket: str | None = None,
    exact_up_to: int = EXACT_QUANTILES_UP_TO,
) -> Dashboard:
    """Every frame of the Invocations page for one filter, over one connection. Over every row of a store with more
    than `exact_up_to` rows, the figures come from the rollups (quantiles approximate: `quantiles_approximate`)."""
    where, params = flt.where()
    shape = _Shape(row_limit, top_n, bucket, exact_up_to)

    def run(con: duckdb.DuckDBPyConnection) -> Dashboard:
        if where == "TRUE":
            return _frames(con, "tool_invocation", shape, every_row=True)
        # A filter is read once: the matching rows' ids, then what every frame reads of them into a temp table.
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {_MATCHED_IDS} AS SELECT rowid AS row_id FROM tool_invocation WHERE {where}",
            params,
        )
        try:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {_MATCHED} AS SELECT rowid AS row_id, {', '.join(_MATCHED_COLUMNS)} "
                f"FROM tool_invocation WHERE rowid IN (SELECT row_id FROM {_MATCHED_IDS})"
            )
            return _frames(con, _MATCHED, shape, every_row=False)
        finally:
            con.execute(f"DROP TABLE IF EXISTS {_MATCHED}")
            con.execute(f"DROP TABLE IF EXISTS {_MATCHED_IDS}")

    return _read(store, run)


@dataclass(frozen=True)
class _Shape:
    """How much of the store one dashboard shows: rows listed, entries per top chart, the time bucket (None: picked
    from the range), and the row count up to which quantiles are exact."""

    row_limit: int
    top_n: int
    bucket: str | None
    exact_up_to: int


def _frames(con: duckdb.DuckDBPyConnection, table: str, shape: _Shape, *, every_row: bool) -> Dashboard:
    """The Dashboard of the rows of `table` (every row of the store, or the filter's temp table)."""
    summary = _rollup_summary(con, shape.exact_up_to) if every_row else None
    total, fallbacks, median, first, last, latency = summary if summary is not None else _scanned_summary(con, table)
    unit = shape.bucket or pick_bucket(first, last)
    rows = _newest_rows(con, table, shape.row_limit, every_row=every_row)
    per_layer = _per_layer(con, table, unit, every_row=every_row)
    over_time = per_layer[["bucket", "layer", "calls"]].reset_index(drop=True)
    samples = _stage_samples(con, table, None if summary is None else int(total))
    fallback = per_layer.groupby("bucket", as_index=False, sort=True)[["calls", "fallbacks"]].sum()
    fallback["rate"] = fallback["fallbacks"] / fallback["calls"] if not fallback.empty else []
    domains, unrouted = _domains(con, table, int(shape.top_n))
    keywords = _keywords(con, table, int(shape.top_n) * KEYWORD_POOL, every_row=every_row)
    told = [telling(str(k), None if pd.isna(f) else str(f)) for k, f in zip(keywords["keyword"], keywords["field"], strict=True)]
    told_rows = keywords[told] if len(keywords) else keywords
    # what the chart of every keyword shows that the telling ones leave out
    hidden = tuple(dict.fromkeys(str(k) for k, x in zip(keywords["keyword"].head(int(shape.top_n)), told, strict=False) if not x))
    return Dashboard(
        int(total),
        int(fallbacks),
        None if median is None else float(median),
        rows,
        over_time,
        latency,
        samples,
        fallback,
        domains,
        keywords.head(int(shape.top_n)).reset_index(drop=True),
        unit,
        summary is not None,
        told_rows.head(int(shape.top_n)).reset_index(drop=True),
        hidden,
        unrouted,
    )


def _domains(con: duckdb.DuckDBPyConnection, table: str, top_n: int) -> tuple[pd.DataFrame, int]:
    """The top domains the calls were routed to (domain, calls), and the calls routed to none: counted apart, so
    that they do not crowd the domains out of a chart."""
    found = con.execute(
        f"SELECT routed, count(*) AS calls FROM (SELECT nullif(domain, '') AS routed FROM {table}) "
        "GROUP BY routed ORDER BY routed IS NOT NULL, calls DESC, routed LIMIT ?",
        [top_n + 1],
    ).df()
    none = found["routed"].isna()
    unrouted = int(found.loc[none, "calls"].sum())
    top = found.loc[~none].head(top_n).rename(columns={"routed": "domain"}).reset_index(drop=True)
    return top, unrouted


def _newest_rows(con: duckdb.DuckDBPyConnection, table: str, row_limit: int, *, every_row: bool) -> pd.DataFrame:
    """The newest calls: over every row those of the newest hours that hold row_limit calls, a filtered page's by id."""
    newest = (
        f"WHERE created_at >= ({_NEWEST_HOURS_SQL}) "
        if every_row
        else f"WHERE rowid IN (SELECT row_id FROM {table} ORDER BY created_at DESC, id LIMIT ?) "
    )
    sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM tool_invocation {newest}ORDER BY created_at DESC, id LIMIT ?"
    return con.execute(sql, [int(row_limit)] * 2).df()


def _per_layer(con: duckdb.DuckDBPyConnection, table: str, unit: str, *, every_row: bool) -> pd.DataFrame:
    """Both charts over time in one read: calls per bucket and layer, and the fallbacks among them."""
    if every_row and unit != "minute":
        sql = (
            f"SELECT date_trunc('{unit}', hour) AS bucket, layer, CAST(sum(calls) AS BIGINT) AS calls, "
            "CAST(sum(fallbacks) AS BIGINT) AS fallbacks FROM invocation_hourly GROUP BY ALL ORDER BY bucket, layer"
        )
    else:
        sql = (
            f"SELECT date_trunc('{unit}', created_at) AS bucket, layer, count(*) AS calls, "
            f"count(*) FILTER (WHERE fallback) AS fallbacks FROM {table} GROUP BY ALL ORDER BY bucket, layer"
        )
    return con.execute(sql).df()


def _stage_samples(con: duckdb.DuckDBPyConnection, table: str, total: int | None) -> pd.DataFrame:
    """Per-stage timings of calls drawn at random. Over every row of a big store (`total` given) the reservoir draws
    from whole vectors picked at random first (about SAMPLE_VECTORS of 2,048 rows): a full scan took 50-260 ms at 1M."""
    picked = ""
    if total is not None:
        percent = min(100.0, 100.0 * SAMPLE_VECTORS * 2048 / max(total, 1))
        picked = f" TABLESAMPLE {percent:.4f}% (system, 7)"
    return con.execute(
        f"UNPIVOT (SELECT * FROM (SELECT id, {', '.join(f'{s}_ms AS {s}' for s in STAGES)} "
        f"FROM {table}{picked}) USING SAMPLE reservoir({SAMPLE_CALLS} ROWS) REPEATABLE (7)) "
        f"ON {', '.join(STAGES)} INTO NAME stage VALUE ms"
    ).df()


def _keywords(con: duckdb.DuckDBPyConnection, table: str, pool: int, *, every_row: bool) -> pd.DataFrame:
    """The most matched L0 keywords: from the keyword rollup over every row, else from the matching rows' own lists."""
    if every_row:
        return con.execute(top_keywords_sql(), [pool]).df()
    return con.execute(
        f"SELECT {term_sql('k.term')} AS keyword, k.field AS field, count(*) AS calls FROM (SELECT "
        f"unnest({KEYWORDS_COLUMN}) AS k FROM {table}) WHERE {term_sql('k.term')} <> '' GROUP BY ALL "
        "ORDER BY calls DESC, keyword, field LIMIT ?",
        [pool],
    ).df()


def export_frame(store: InvocationStore, flt: InvocationFilter) -> pd.DataFrame:
    """Every matching row with every column (JSON columns as text), oldest first, for CSV/Parquet export."""
    where, params = flt.where()
    columns = ", ".join(f"CAST({c} AS VARCHAR) AS {c}" if c in ("result", "retrieval_details") else c for c in COLUMNS)
    return _read(
        store,
        lambda con: con.execute(f"SELECT {columns} FROM tool_invocation WHERE {where} ORDER BY created_at, id", params).df(),
    )


def details_for(store: InvocationStore, invocation_id: str) -> dict[str, Any] | None:
    """The parsed retrieval_details of one invocation (None if there is no such id)."""
    row = store.with_connection(
        lambda con: con.execute(
            "SELECT CAST(retrieval_details AS VARCHAR) FROM tool_invocation WHERE id = ?", [invocation_id]
        ).fetchone(),
        read_only=True,
    )
    if row is None:
        return None
    return json.loads(row[0]) if row[0] else {}


def result_for(store: InvocationStore, invocation_id: str) -> dict[str, Any] | None:
    """The parsed result (results and relevance) of one invocation (None if there is no such id)."""
    row = store.with_connection(
        lambda con: con.execute("SELECT CAST(result AS VARCHAR) FROM tool_invocation WHERE id = ?", [invocation_id]).fetchone(),
        read_only=True,
    )
    if row is None:
        return None
    return json.loads(row[0]) if row[0] else {}
