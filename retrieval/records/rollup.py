"""Rollups of tool_invocation kept at insert time, so the Invocations page over every row reads a few thousand rows:
`invocation_hourly` (calls per hour and layer), `invocation_histogram` (per metric, 1%-wide log buckets: quantiles
within 0.5%) and `invocation_keyword_count` (calls per matched keyword and field; a missing field is '').
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from retrieval.core.record import STAGES

METRICS = ("latency", *STAGES)  # latency_ms, then the stage columns l0_ms, embed_ms ...
BUCKET_RATIO = 1.01  # each histogram bucket spans values within 1% of each other
FLOOR_MS = 0.001  # timings below this (0 included) count in the bucket of 1 µs
TABLES = ("invocation_hourly", "invocation_histogram", "invocation_keyword_count")
ROLLUP_SCHEMA = """
CREATE TABLE IF NOT EXISTS invocation_hourly (
    hour TIMESTAMPTZ NOT NULL,
    layer VARCHAR NOT NULL,
    calls BIGINT NOT NULL,
    fallbacks BIGINT NOT NULL,
    first_at TIMESTAMPTZ NOT NULL,
    last_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (hour, layer)
);
CREATE TABLE IF NOT EXISTS invocation_histogram (
    metric VARCHAR NOT NULL,
    bucket INTEGER NOT NULL,
    calls BIGINT NOT NULL,
    total_ms DOUBLE NOT NULL,
    PRIMARY KEY (metric, bucket)
);
CREATE TABLE IF NOT EXISTS invocation_keyword_count (
    term VARCHAR NOT NULL,
    field VARCHAR NOT NULL,
    calls BIGINT NOT NULL,
    PRIMARY KEY (term, field)
);
"""


def _bucket(expr: str) -> str:
    return f"CAST(floor(ln(greatest({expr}, {FLOOR_MS})) / ln({BUCKET_RATIO})) AS INTEGER)"


def bucket_value_sql(bucket: str) -> str:
    """The value a bucket stands for: the geometric middle of its range."""
    return f"exp(({bucket} + 0.5) * ln({BUCKET_RATIO}))"


def bucket_of(ms: float) -> int:
    """The histogram bucket of a value, as the SQL computes it (for tests)."""
    return math.floor(math.log(max(ms, FLOOR_MS)) / math.log(BUCKET_RATIO))


def add_to_rollup(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Add the rows of `source` (created_at, layer, fallback, latency_ms and the stage columns; each invocation once)
    to both rollups, in the caller's transaction."""
    con.execute(
        "INSERT INTO invocation_hourly SELECT date_trunc('hour', created_at), layer, count(*), "
        f"count(*) FILTER (WHERE fallback), min(created_at), max(created_at) FROM {source} GROUP BY ALL "
        "ON CONFLICT (hour, layer) DO UPDATE SET calls = calls + excluded.calls, fallbacks = fallbacks + excluded.fallbacks, "
        "first_at = least(first_at, excluded.first_at), last_at = greatest(last_at, excluded.last_at)"
    )
    columns = ", ".join(["latency_ms AS latency", *(f"{s}_ms AS {s}" for s in STAGES)])
    con.execute(
        f"INSERT INTO invocation_histogram SELECT metric, {_bucket('ms')} AS bucket, count(*), sum(ms) FROM "
        f"(UNPIVOT (SELECT {columns} FROM {source}) ON {', '.join(METRICS)} INTO NAME metric VALUE ms) GROUP BY ALL "
        "ON CONFLICT (metric, bucket) DO UPDATE SET calls = calls + excluded.calls, total_ms = total_ms + excluded.total_ms"
    )


def term_sql(column: str) -> str:
    """A matched term as counted: spaces trimmed and runs of white space made one space, so that "pods" and "pods "
    count as one keyword."""
    return f"trim(regexp_replace({column}, '\\s+', ' ', 'g'))"


def add_keyword_counts(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Add the keyword rows of `source` (term, field; each of an invocation once) to invocation_keyword_count, in the
    caller's transaction."""
    con.execute(
        f"INSERT INTO invocation_keyword_count SELECT {term_sql('term')}, coalesce(field, ''), count(*) FROM {source} "
        f"WHERE {term_sql('term')} <> '' GROUP BY ALL ON CONFLICT (term, field) DO UPDATE SET calls = calls + excluded.calls"
    )


def top_keywords_sql() -> str:
    """The page's top keywords over every row, from the rollup: keyword, field, calls, with one parameter (how many),
    ordered as the scan of invocation_keyword orders them."""
    return (  # terms counted before they were trimmed add up with their trimmed twins
        f"SELECT {term_sql('term')} AS keyword, nullif(field, '') AS field, CAST(sum(calls) AS BIGINT) AS calls "
        f"FROM invocation_keyword_count WHERE {term_sql('term')} <> '' GROUP BY ALL ORDER BY calls DESC, keyword, field "
        "LIMIT ?"
    )


def ensure_rollup(con: duckdb.DuckDBPyConnection, tables_before: set[str]) -> None:
    """Create the rollups; fill them from tool_invocation and invocation_keyword in a file written before they
    existed."""
    con.execute(ROLLUP_SCHEMA)
    if not {"invocation_hourly", "invocation_histogram"} <= tables_before:
        con.execute("DELETE FROM invocation_hourly")
        con.execute("DELETE FROM invocation_histogram")
        add_to_rollup(con, "tool_invocation")
    if "invocation_keyword_count" not in tables_before:
        con.execute("DELETE FROM invocation_keyword_count")
        add_keyword_counts(con, "invocation_keyword")


def histogram_figures(con: Any, quantiles: tuple[float, ...] = (0.5, 0.95)) -> dict[str, tuple[int, list[float], float]]:
    """Per metric with calls: (calls, the approximate quantiles, the exact mean)."""
    picks = ", ".join(f"min(bucket) FILTER (WHERE upto >= {float(q)} * n)" for q in quantiles)
    rows = con.execute(
        "SELECT metric, any_value(n), any_value(total) / any_value(n), "
        f"{picks} FROM (SELECT metric, bucket, sum(calls) OVER (PARTITION BY metric ORDER BY bucket) AS upto, "
        "sum(calls) OVER (PARTITION BY metric) AS n, sum(total_ms) OVER (PARTITION BY metric) AS total "
        "FROM invocation_histogram) GROUP BY metric"
    ).fetchall()
    return {
        str(m): (int(n), [math.exp((b + 0.5) * math.log(BUCKET_RATIO)) for b in buckets], float(mean))
        for m, n, mean, *buckets in rows
        if n
    }
