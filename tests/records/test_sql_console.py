"""The read-only SQL console against a real DuckDB invocation store: hostile statements, limits, examples.

Run with `pytest -s` to see the figures.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.errors import SqlRefused
from retrieval.records.invocations import COLUMNS, STAGE_COLUMNS, InvocationStore
from retrieval.records.schema import KEYWORDS_COLUMN, TRAFFIC_COLUMNS
from retrieval.records.sql_console import EXAMPLES, check_statement, run_readonly

from ..helpers.memory import reset_peak, status_kb

LAYERS = ["L0", "L0+L1", "L1", "fallback"]
DOMAINS = ["databases", "network", "storage"]


def make_record(i: int, **overrides) -> InvocationRecord:
    domain = DOMAINS[i % len(DOMAINS)]
    fallback = i % 4 == 3
    rec = InvocationRecord(
        id=new_invocation_id(),
        created_at=utc_now_iso(),
        tool_name=TOOL_NAME,
        input=f"alert {i}: {domain} is unhappy",
        status="fallback" if fallback else "ok",
        layer=LAYERS[i % len(LAYERS)],
        latency_ms=float(10 * i + 1),
        result={"results": [{"entry_id": f"{domain}-{i % 2}", "score": 0.9}]},
        retrieval_details={
            "l0": {"domains": [domain, "ops"], "matched_keywords": [{"term": domain, "field": "domain", "weight": 1.0}]},
            "l1": {"filter": {"domain": domain}, "status": "ok"},
            "timings_ms": {"l0": 0.1 * i, "l1": 2.0},
        },
        error="L1 unreachable" if fallback else None,
        session_tag="console",
        domain=domain,
        l1_status="unavailable" if fallback else "ok",
        fallback=fallback,
        top_entry_id=f"{domain}-{i % 2}",
    )
    return replace(rec, **overrides)


def filled_store(db_path: Path, n: int) -> tuple[InvocationStore, list[InvocationRecord]]:
    store = InvocationStore(db_path)
    recs = [make_record(i) for i in range(n)]
    for rec in recs:
        store.record(rec)
    store.flush()
    return store, recs


def fingerprint(store: InvocationStore) -> tuple:
    """Row count and an order-independent digest of every row: any change to the table changes it."""
    frame = store.query(
        "SELECT count(*) AS n, sum(hash(id, input, layer, latency_ms, CAST(retrieval_details AS VARCHAR))) AS h "
        "FROM tool_invocation",
        flush_first=False,
    )
    tables = store.query("SELECT table_name FROM duckdb_tables() ORDER BY ALL", flush_first=False)["table_name"].tolist()
    return int(frame["n"][0]), int(frame["h"][0]), tables


# --- hostile statements ------------------------------------------------------------------------------------
# {tmp} is a scratch folder: any file or database these might create would land there, and must not.
HOSTILE = [
    "DROP TABLE tool_invocation",
    "DELETE FROM tool_invocation",
    "TRUNCATE tool_invocation",
    "INSERT INTO tool_invocation SELECT * FROM tool_invocation",
    "INSERT OR REPLACE INTO tool_invocation SELECT * FROM tool_invocation",
    "UPDATE tool_invocation SET status = 'pwned'",
    "CREATE TABLE evil AS SELECT * FROM tool_invocation",
    "CREATE OR REPLACE TABLE tool_invocation AS SELECT 1 AS id",
    "CREATE TEMP TABLE evil AS SELECT * FROM tool_invocation",
    "CREATE VIEW evil AS SELECT 1",
    "CREATE MACRO evil(a) AS a + 1",
    "CREATE SECRET evil (TYPE s3, KEY_ID 'k', SECRET 's')",
    "ALTER TABLE tool_invocation ADD COLUMN evil INTEGER",
    "ALTER TABLE tool_invocation RENAME TO gone",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "DETACH invocations",
    "COPY tool_invocation TO '{tmp}/leak.csv'",
    "COPY (SELECT * FROM tool_invocation) TO '{tmp}/leak.parquet' (FORMAT parquet)",
    "COPY tool_invocation FROM '/etc/passwd'",
    "EXPORT DATABASE '{tmp}/export'",
    "IMPORT DATABASE '{tmp}/export'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/hostname')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "SELECT * FROM read_parquet('{tmp}/*.parquet')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "PRAGMA enable_profiling",
    "SELECT 1; DROP TABLE tool_invocation",
    "SELECT 1; SELECT 2",
    "DROP TABLE tool_invocation; SELECT 1",
    "WITH gone AS (DELETE FROM tool_invocation RETURNING *) SELECT count(*) FROM gone",
    "SELECT * FROM query('DROP TABLE tool_invocation')",
    "CALL pragma_version()",
    "VACUUM",
    "ANALYZE",
    "USE memory",
    "BEGIN TRANSACTION",
    "PREPARE p AS DELETE FROM tool_invocation",
    # sneaky: comments, casing, stray semicolons, EXPLAIN ANALYZE (which runs what it explains)
    "/* just a select */ dRoP /* really */ TaBlE tool_invocation",
    "-- read only, promise\nDELETE FROM tool_invocation",
    ";;DELETE FROM tool_invocation;;",
    "select 1 /* ; */ ; delete from tool_invocation -- ;",
    "EXPLAIN ANALYZE CREATE TEMP TABLE evil AS SELECT 1",
    "EXPLAIN ANALYZE CHECKPOINT",
    "EXPLAIN (ANALYZE) DELETE FROM tool_invocation",
    "explain (format json, analyze) update tool_invocation set status = 'x'",
    "EXPLAIN ANALYZE COPY tool_invocation TO '{tmp}/leak2.csv'",
    "EXPLAIN ANALYZE SELECT * FROM read_text('/etc/passwd')",
]
# Statements DuckDB's read-only, sandboxed connection would let through: only the allow-list stops them.
PASS_THE_SANDBOX = [
    "CREATE TEMP TABLE evil AS SELECT * FROM tool_invocation",
    "CHECKPOINT",
    "EXPLAIN ANALYZE CREATE TEMP TABLE evil AS SELECT 1",
    "EXPLAIN ANALYZE CHECKPOINT",
]


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    store, _ = filled_store(root / "invocations.duckdb", 12)
    return store, root / "scratch"


def refuse(store: InvocationStore, sql: str) -> str:
    with pytest.raises(SqlRefused) as refused:
        run_readonly(store, sql, row_limit=100, timeout_ms=5_000)
    return str(refused.value)


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_statement_is_refused(hostile_store, template):
    store, scratch = hostile_store
    scratch.mkdir(exist_ok=True)
    before = fingerprint(store)
    message = refuse(store, template.format(tmp=scratch))
    assert message.strip()
    assert fingerprint(store) == before, "the table changed"
    assert list(scratch.iterdir()) == [], "a file was written"


@pytest.mark.parametrize("sql", PASS_THE_SANDBOX)
def test_allow_list_refuses_what_the_sandbox_would_run(sql):
    with pytest.raises(SqlRefused, match="refused"):
        check_statement(sql)


def test_all_hostile_statements_in_a_row_leave_the_table_intact(db_path, tmp_path):
    store, recs = filled_store(db_path, 12)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = fingerprint(store)
    refused, by_allow_list, failures = 0, 0, []
    for template in HOSTILE:
        sql = template.format(tmp=scratch)
        try:
            run_readonly(store, sql, row_limit=100, timeout_ms=5_000)
            failures.append(sql)
        except SqlRefused:
            refused += 1
            try:
                check_statement(sql)
            except SqlRefused:
                by_allow_list += 1
    after = fingerprint(store)
    print(
        f"\nhostile statements refused: {refused} / {len(HOSTILE)} ({by_allow_list} by the statement allow-list, "
        f"{refused - by_allow_list} by the read-only sandboxed connection); rows before {before[0]}, after {after[0]}"
    )
    assert not failures, f"these ran: {failures}"
    assert len(HOSTILE) >= 30
    assert after == before
    tables = [
        "invocation_histogram",
        "invocation_hourly",
        "invocation_keyword",
        "invocation_keyword_count",
        "invocation_result",
        "tool_invocation",
    ]
    assert after[0] == len(recs) and after[2] == tables
    assert sorted(store.query("SELECT id FROM tool_invocation")["id"]) == sorted(r.id for r in recs)
    assert list(scratch.iterdir()) == []


# --- what must work ---------------------------------------------------------------------------------
def test_select_and_explain_run(db_path):
    store, recs = filled_store(db_path, 9)
    out = run_readonly(store, "SELECT id, layer, latency_ms FROM tool_invocation ORDER BY latency_ms")
    assert not out.truncated
    assert list(out.frame.columns) == ["id", "layer", "latency_ms"]
    assert list(out.frame["id"]) == [r.id for r in sorted(recs, key=lambda r: r.latency_ms)]
    assert out.elapsed_ms >= 0

    for sql in [
        "EXPLAIN SELECT layer, count(*) FROM tool_invocation GROUP BY layer",
        "/* plan */ explain analyze SELECT * FROM tool_invocation WHERE fallback",
        "EXPLAIN (FORMAT json) SELECT * FROM tool_invocation",
    ]:
        assert check_statement(sql) == "EXPLAIN"
        plan = run_readonly(store, sql)
        text = " ".join(str(v) for v in plan.frame.to_numpy().ravel()).lower()
        assert "tool_invocation" in text or "scan" in text, text[:300]

    # Other read-only forms DuckDB types as SELECT.
    assert run_readonly(store, "FROM tool_invocation SELECT count(*) AS n").frame["n"][0] == len(recs)
    assert run_readonly(store, "WITH x AS (SELECT * FROM tool_invocation WHERE fallback) SELECT count(*) AS n FROM x").frame["n"][
        0
    ] == sum(r.fallback for r in recs)
    assert list(run_readonly(store, "DESCRIBE tool_invocation").frame["column_name"]) == [
        *COLUMNS,
        *STAGE_COLUMNS,
        KEYWORDS_COLUMN,
        *TRAFFIC_COLUMNS,
    ]


def test_values_come_back_as_stored(db_path):
    """TIMESTAMPTZ (created_at), NULLs, JSON text, lists and structs all reach the frame."""
    store, recs = filled_store(db_path, 4)
    out = run_readonly(
        store,
        "SELECT id, created_at, error, retrieval_details->'l0'->'domains' AS d, "
        "[1, 2, NULL] AS l, {'a': [3, 4]} AS s FROM tool_invocation ORDER BY latency_ms",
    )
    assert len(out.frame) == len(recs)
    for rec, (_, row) in zip(recs, out.frame.iterrows(), strict=True):
        assert row["id"] == rec.id
        assert pd.Timestamp(row["created_at"]) == pd.Timestamp(rec.created_at)
        assert row["error"] == rec.error  # None for SQL NULL, not NaN
        assert json.loads(row["d"]) == rec.retrieval_details["l0"]["domains"]
        assert row["l"] == [1, 2, None]
        assert row["s"] == {"a": [3, 4]}
    nulls = run_readonly(
        store,
        "SELECT NULL::INTEGER AS i, NULL::BOOLEAN AS b, NULL::TIMESTAMPTZ AS t, "
        "CASE WHEN fallback THEN NULL ELSE latency_ms END AS maybe FROM tool_invocation ORDER BY latency_ms",
    )
    assert nulls.frame[["i", "b", "t"]].map(lambda v: v is None).all().all()
    assert list(nulls.frame["maybe"]) == [None if r.fallback else r.latency_ms for r in recs]
    assert json.loads(json.dumps(nulls.frame.to_dict(orient="records")[0], default=str)) == {
        "i": None,
        "b": None,
        "t": None,
        "maybe": recs[0].latency_ms,
    }
    empty = run_readonly(store, "SELECT id, created_at FROM tool_invocation WHERE false")
    assert list(empty.frame.columns) == ["id", "created_at"] and empty.frame.empty and not empty.truncated


@pytest.mark.parametrize("limit", [1, 7, 12, 13, 100])
def test_row_limit_truncates(db_path, limit):
    store, recs = filled_store(db_path, 12)
    out = run_readonly(store, "SELECT id FROM tool_invocation ORDER BY latency_ms", row_limit=limit)
    assert len(out.frame) == min(limit, len(recs))
    assert out.truncated is (limit < len(recs))
    assert list(out.frame["id"]) == [r.id for r in recs][:limit]


def test_row_limit_streams_a_huge_result(db_path):
    """fetchmany: 10^10 rows are never materialised to show 5."""
    store, _ = filled_store(db_path, 1)
    t = time.perf_counter()
    out = run_readonly(store, "SELECT range AS n FROM range(10000000000)", row_limit=5, timeout_ms=2_000)
    elapsed = time.perf_counter() - t
    print(f"\n5 rows of 10^10 in {elapsed * 1000:.0f} ms, truncated={out.truncated}")
    assert out.truncated and list(out.frame["n"]) == [0, 1, 2, 3, 4]
    assert elapsed < 10.0  # materialising 10^10 rows would take hours; 10 s leaves room for a busy machine


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM range(100000000000) a, range(1000) b",
        "SELECT * FROM range(100000000000) r WHERE hash(r.range) = 0",  # stopped while fetching, not executing
    ],
)
def test_runaway_query_is_stopped_at_the_time_limit(db_path, sql):
    store, recs = filled_store(db_path, 3)
    t = time.perf_counter()
    with pytest.raises(SqlRefused) as refused:
        run_readonly(store, sql, timeout_ms=1_000)
    elapsed = time.perf_counter() - t
    print(f"\nrunaway query stopped after {elapsed:.2f}s (limit 1.0s): {refused.value}")
    assert "time limit" in str(refused.value) and "1000 ms" in str(refused.value)
    assert elapsed < 10
    assert run_readonly(store, "SELECT count(*) AS n FROM tool_invocation").frame["n"][0] == len(recs)  # still usable


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_queries_run(db_path, name):
    store, recs = filled_store(db_path, 10)
    out = run_readonly(store, EXAMPLES[name])
    frame = out.frame
    assert not frame.empty, f"{name}: no rows"
    if name == "Calls per layer":
        want = {layer: sum(r.layer == layer for r in recs) for layer in {r.layer for r in recs}}
        assert dict(zip(frame["layer"], frame["calls"], strict=True)) == want
    elif name == "Fallbacks with their L1 error":
        assert len(frame) == sum(r.fallback for r in recs)
        assert set(frame["error"]) == {"L1 unreachable"}
    elif name == "Slowest calls":
        assert list(frame["latency_ms"]) == sorted((r.latency_ms for r in recs), reverse=True)
    elif name == "L0 domains per call":
        by_input = {r.input: r for r in recs}
        for _, row in frame.iterrows():
            rec = by_input[row["input"]]
            assert json.loads(row["l0_domains"]) == rec.retrieval_details["l0"]["domains"]
            assert json.loads(row["l1_filter"]) == rec.retrieval_details["l1"]["filter"]
    elif name == "Top result per domain":
        assert int(frame["n"].sum()) == len(recs)
    elif name == "Entries returned most (any rank)":
        want = Counter(r.result["results"][0]["entry_id"] for r in recs)
        assert dict(zip(frame["entry_id"], frame["calls"], strict=True)) == dict(want)
        assert set(frame["mean_rank"]) == {1.0}
    elif name == "Keywords that led to a fallback":
        want = Counter(r.domain for r in recs if r.fallback)
        assert dict(zip(frame["term"], frame["calls"], strict=True)) == dict(want) and want
    elif name == "Stage latency p95 per layer":
        assert set(frame["layer"]) == {r.layer for r in recs} and set(frame["l1_p95"]) == {2.0}
        assert frame["embed_p95"].isna().all()  # not timed in these rows
    else:
        pytest.fail(f"example {name!r} has no check here")


# --- clear messages ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sql", ["", "   ", "\n\t", "-- only a comment", "/* nothing */", ";", " ; ; "])
def test_empty_statement_is_refused_clearly(db_path, sql):
    store, _ = filled_store(db_path, 1)
    with pytest.raises(SqlRefused, match="empty"):
        run_readonly(store, sql)


@pytest.mark.parametrize("sql", ["SELEC 1", "SELECT FROM WHERE", "SELECT (1", "SELECT * FROM tool_invocation WHERE"])
def test_unparseable_statement_is_refused_clearly(db_path, sql):
    store, _ = filled_store(db_path, 1)
    with pytest.raises(SqlRefused, match="does not parse") as refused:
        run_readonly(store, sql)
    assert "syntax error" in str(refused.value).lower()


def test_unknown_table_or_column_names_the_problem(db_path):
    store, _ = filled_store(db_path, 1)
    with pytest.raises(SqlRefused, match="nope"):
        run_readonly(store, "SELECT nope FROM tool_invocation")


# One read-only query, tried as a new user would, that peaked at 3.4 GB RSS when the console had no memory budget.
OVER_BUDGET = "SELECT max(length(s)) FROM (SELECT repeat('x', 1000) || range AS s FROM range(3000000) ORDER BY random())"
PYTHON_SHARE_MB = 128  # beside DuckDB's budget: the interpreter's own growth while the query runs


def test_a_query_over_the_memory_budget_is_refused_and_memory_stays_within_it(db_path):
    store, _ = filled_store(db_path, 3)
    before_kb = reset_peak()
    with pytest.raises(SqlRefused, match=re.escape("the query went over the memory budget of 256MB")):
        run_readonly(store, OVER_BUDGET, timeout_ms=600_000)  # memory stops it, not the time limit
    grown_mb = (status_kb("VmHWM") - before_kb) / 1024
    assert grown_mb < 256 + PYTHON_SHARE_MB, f"grew {grown_mb:.0f} MB"
    assert run_readonly(store, "SELECT count(*) AS n FROM tool_invocation").frame["n"][0] == 3  # the store still answers


def test_the_sql_command_prints_no_pandas_warning(db_path):
    """duckdb's DataFrame conversion raised a Pandas4Warning per chunk (pandas 3.1): 56 lines in the app log."""
    filled_store(db_path, 3)[0].close()
    env = {**os.environ, "LOOKUP_DB_PATH": str(db_path), "PYTHONWARNINGS": "default"}
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval", "sql", "SELECT created_at, domain, retrieval_details FROM tool_invocation"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 4  # the header and three rows
    assert "Warning" not in proc.stderr, proc.stderr
