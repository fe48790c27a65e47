"""The tables of the invocation store: `tool_invocation` (one row per lookup, its JSON beside typed copies of what the
dashboard reads), its child tables `invocation_keyword` and `invocation_result`, and bringing an older file up to date.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from retrieval.core.record import STAGES
from retrieval.records.rollup import ROLLUP_SCHEMA, add_keyword_counts, ensure_rollup  # rollups of the tables here

# The JSON columns are compressed with zstd: DuckDB's default for long strings (dictionary + FSST) took 15-80 s
# to checkpoint 20k rows (12 KB of JSON each), zstd 1-5 s, in a smaller file. They are VARCHAR holding JSON text:
# the text always comes from orjson/json (retrieval.records.spool), and the JSON type parsed all of it once more on
# every insert to check it (a fifth of the insert's CPU). DuckDB's JSON operators (->, ->>, json_extract) read
# VARCHAR as JSON. (A file written before keeps its own types, JSON included.)
SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_invocation (
    id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    tool_name VARCHAR NOT NULL,
    input VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    layer VARCHAR NOT NULL,
    latency_ms DOUBLE NOT NULL,
    result VARCHAR USING COMPRESSION zstd,
    retrieval_details VARCHAR USING COMPRESSION zstd,
    error VARCHAR,
    session_tag VARCHAR NOT NULL,
    domain VARCHAR,
    l1_status VARCHAR,
    fallback BOOLEAN,
    top_entry_id VARCHAR
);
"""
# Every connection that writes the file attaches it with row groups of this many rows (DuckDB's default is 122,880).
# A row here carries 12-26 KB of JSON, so a default group is 1.5-3 GB of it, held and compressed anew at each
# checkpoint while it fills: with 2,048-row groups (53 MB of 26 KB rows) a 60k-row insert took 40% less CPU and
# 400 MB less peak RSS, and the newest-rows query skips more of the file by its zone maps (docs/history/benchmarks-notebook.md).
ROW_GROUP_ROWS = 2048
COLUMNS = (
    "id",
    "created_at",
    "tool_name",
    "input",
    "status",
    "layer",
    "latency_ms",
    "result",
    "retrieval_details",
    "error",
    "session_tag",
    "domain",
    "l1_status",
    "fallback",
    "top_entry_id",
)
STAGE_COLUMNS = tuple(f"{s}_ms" for s in STAGES)  # ... and typed copies of them in tool_invocation
# ... and of the L0 matched keywords: a filtered Invocations page counts them from the matching rows alone instead
# of joining those with every row of invocation_keyword (6M rows at 1M calls: 0.3-1.4 s).
KEYWORDS_COLUMN = "l0_keywords"
KEYWORD_LIST = "STRUCT(term VARCHAR, field VARCHAR, weight DOUBLE)[]"
CHILD_SCHEMA = """
CREATE TABLE IF NOT EXISTS invocation_keyword (
    invocation_id VARCHAR NOT NULL,
    term VARCHAR NOT NULL,
    field VARCHAR,
    weight DOUBLE
);
CREATE TABLE IF NOT EXISTS invocation_result (
    invocation_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    entry_id VARCHAR NOT NULL,
    domain VARCHAR,
    source VARCHAR,
    score DOUBLE
);
"""
KEYWORD_TYPE = '[{"term": "VARCHAR", "field": "VARCHAR", "weight": "DOUBLE"}]'
RESULT_TYPE = '[{"entry_id": "VARCHAR", "domain": "VARCHAR", "source": "VARCHAR", "score": "DOUBLE"}]'

# ... and of what traffic reads (retrieval.traffic.features.TRAFFIC_COLUMNS, the same names): the support estimate, its
# claim and which fit gave it, whether L0 matched an entry and an entry's title, the top result's domain, the collection.
TRAFFIC_TYPES = (
    ("support", "DOUBLE"),
    ("supported", "BOOLEAN"),
    ("support_fit", "VARCHAR"),
    ("l0_matched", "BOOLEAN"),
    ("names_entry", "BOOLEAN"),
    ("top_domain", "VARCHAR"),
    ("collection", "VARCHAR"),
)
TRAFFIC_COLUMNS = tuple(column for column, _ in TRAFFIC_TYPES)
_ARROW = {"DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(), "VARCHAR": pa.string()}


def _nonempty_sql(path: str) -> str:
    return (
        f"CASE WHEN json_type(retrieval_details, '{path}') = 'ARRAY' THEN json_array_length(retrieval_details, '{path}') > 0 END"
    )


# Each traffic column read from an older row's JSON, as retrieval.records.parts reads it from a new one.
TRAFFIC_SQL = {
    "support": "TRY_CAST(json_extract_string(retrieval_details, '$.relevance.confidence') AS DOUBLE)",
    "supported": "CASE WHEN json_type(retrieval_details, '$.relevance.semantic_support') = 'BOOLEAN' "
    "THEN json_extract_string(retrieval_details, '$.relevance.semantic_support') = 'true' END",
    "support_fit": "nullif(concat_ws(':', json_extract_string(retrieval_details, '$.relevance.fit.baselines.kind'), "
    "json_extract_string(retrieval_details, '$.relevance.fit.baselines.id')), '')",
    "l0_matched": _nonempty_sql("$.l0.matches"),
    "names_entry": "CASE WHEN json_type(retrieval_details, '$.l0.matches') = 'ARRAY' THEN "
    "list_contains(json_extract_string(retrieval_details, '$.l0.matches[*].named'), 'true') END",
    "top_domain": "json_extract_string(result, '$.results[0].domain')",
    "collection": "json_extract_string(retrieval_details, '$.collection')",
}
RESULTS_PART = "results"  # an incoming row's results list (invocation_result's rows), typed
STORED_PARTS = (*STAGE_COLUMNS, KEYWORDS_COLUMN, *TRAFFIC_COLUMNS)  # the typed parts tool_invocation keeps
PART_COLUMNS = (*STORED_PARTS, RESULTS_PART)  # what an incoming row carries beside COLUMNS
KEYWORD_STRUCT = pa.struct([("term", pa.string()), ("field", pa.string()), ("weight", pa.float64())])
RESULT_STRUCT = pa.struct([("entry_id", pa.string()), ("domain", pa.string()), ("source", pa.string()), ("score", pa.float64())])
SPOOL_SCHEMA = pa.schema(
    [
        *((c, pa.string()) for c in ("id", "created_at", "tool_name", "input", "status", "layer")),
        ("latency_ms", pa.float64()),
        *((c, pa.string()) for c in ("result", "retrieval_details", "error", "session_tag", "domain", "l1_status")),
        ("fallback", pa.bool_()),
        ("top_entry_id", pa.string()),
        # The parts the store reads out of the JSON, typed, taken from the parsed row (retrieval.records.parts): the
        # insert copies them instead of parsing 12-26 KB of JSON text a row again in DuckDB.
        *((c, pa.float64()) for c in STAGE_COLUMNS),
        (KEYWORDS_COLUMN, pa.list_(KEYWORD_STRUCT)),
        *((c, _ARROW[kind]) for c, kind in TRAFFIC_TYPES),
        (RESULTS_PART, pa.list_(RESULT_STRUCT)),
    ]
)


def derive_children(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Insert the keyword and result rows of every invocation in `source`: a table or query with `id` and the typed
    lists `keywords` (the L0 matched keywords, KEYWORD_STRUCT) and `results` (the result's results list,
    RESULT_STRUCT; a result's rank is its place in the list); the keywords are counted in the keyword rollup too."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE chunk_keyword AS SELECT id AS invocation_id, k.term, k.field, k.weight FROM ("
        f"SELECT id, unnest(keywords) AS k FROM {source}) WHERE k.term IS NOT NULL"
    )
    con.execute("INSERT INTO invocation_keyword SELECT * FROM chunk_keyword")
    add_keyword_counts(con, "chunk_keyword")
    con.execute("DROP TABLE chunk_keyword")
    con.execute(
        "INSERT INTO invocation_result SELECT id, r.rank, r.item.entry_id, r.item.domain, r.item.source, r.item.score "
        "FROM (SELECT id, unnest(list_transform(results, lambda e, i: {'rank': i, 'item': e})) AS r "
        f"FROM {source}) WHERE r.item.entry_id IS NOT NULL"
    )


def children_source(table: str) -> str:
    """A query over `table` (with id, result and retrieval_details as JSON) giving what derive_children reads."""
    return (
        f"(SELECT id, from_json(json_extract(retrieval_details, '$.l0.matched_keywords'), '{KEYWORD_TYPE}') AS keywords, "
        f"from_json(json_extract(result, '$.results'), '{RESULT_TYPE}') AS results FROM {table})"
    )


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All or nothing: COMMIT when the block ends, ROLLBACK if it raises (or the process is interrupted)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables; bring a file written before the typed tables up to date (backfilled from the JSON)."""
    with transaction(con):
        con.execute(SCHEMA)
        have = {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'tool_invocation' AND schema_name = 'main'"
            ).fetchall()
        }
        missing = [c for c in STAGE_COLUMNS if c not in have]
        for column in missing:
            con.execute(f"ALTER TABLE tool_invocation ADD COLUMN {column} DOUBLE")
        if missing:
            exprs = [f"TRY_CAST(json_extract_string(retrieval_details, '$.timings_ms.{s}') AS DOUBLE)" for s in STAGES]
            con.execute(
                f"UPDATE tool_invocation SET {', '.join(f'{c} = {e}' for c, e in zip(STAGE_COLUMNS, exprs, strict=True))}"
            )
        if KEYWORDS_COLUMN not in have:
            con.execute(f"ALTER TABLE tool_invocation ADD COLUMN {KEYWORDS_COLUMN} {KEYWORD_LIST}")
            con.execute(
                f"UPDATE tool_invocation SET {KEYWORDS_COLUMN} = "
                f"from_json(json_extract(retrieval_details, '$.l0.matched_keywords'), '{KEYWORD_TYPE}')"
            )
        _add_traffic_columns(con, have)
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        con.execute(CHILD_SCHEMA)
        con.execute(ROLLUP_SCHEMA)  # derive_children counts keywords into it; ensure_rollup fills what was missing
        if not {"invocation_keyword", "invocation_result"} <= tables:
            con.execute("DELETE FROM invocation_keyword")
            con.execute("DELETE FROM invocation_result")
            derive_children(con, children_source("tool_invocation"))
        ensure_rollup(con, tables)


def _add_traffic_columns(con: duckdb.DuckDBPyConnection, have: set[str]) -> None:
    """Add the traffic columns a file lacks, filled from each row's JSON."""
    missing = [(c, kind) for c, kind in TRAFFIC_TYPES if c not in have]
    for column, kind in missing:
        con.execute(f"ALTER TABLE tool_invocation ADD COLUMN {column} {kind}")
    if missing:
        con.execute(f"UPDATE tool_invocation SET {', '.join(f'{c} = {TRAFFIC_SQL[c]}' for c, _ in missing)}")
