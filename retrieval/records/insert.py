"""Inserting invocation rows: Arrow tables of COLUMNS (JSON columns as text) into tool_invocation and its child
tables, a chunk at a time, each chunk in one transaction, adding only ids not stored yet.

What a chunk costs is DuckDB reading 12-26 KB of JSON a row. Each JSON text is parsed once, into a small staged
table (the stage timings, the matched keywords, the results list) that the typed columns, both child tables and
the rollups are read from; before, the timings, the keywords and the results were each read from the JSON.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from retrieval.records.db_budget import DbBudget
from retrieval.records.rollup import add_to_rollup
from retrieval.records.schema import (
    COLUMNS,
    KEYWORD_TYPE,
    KEYWORDS_COLUMN,
    STAGE_COLUMNS,
    STAGES,
    derive_children,
    transaction,
)

CHUNK_BYTES = (1 << 20, 32 << 20)  # an insert chunk's input: 1/32 of the memory budget, within these bounds
WAL_CHUNKS = 4  # chunks committed to the WAL between checkpoints
STAGED = "invocation_staged"  # the temp table of one chunk's parsed parts

# One parse of each JSON text; a chunk may repeat an id (a spool replayed), and the stage keeps one row of each.
_STAGE_SQL = (
    f"CREATE OR REPLACE TEMP TABLE {STAGED} AS SELECT id, created_at, layer, fallback, latency_ms, "
    + ", ".join(f"TRY_CAST(parts[1]->>'{s}' AS DOUBLE) AS {s}_ms" for s in STAGES)
    + ", parts[2] AS keywords, json_extract(result, '$.results') AS results FROM ("
    "SELECT id, CAST(created_at AS TIMESTAMPTZ) AS created_at, layer, fallback, latency_ms, result, "
    "json_extract(retrieval_details, ['$.timings_ms', '$.l0.matched_keywords']) AS parts "
    "FROM incoming_chunk) QUALIFY row_number() OVER (PARTITION BY id) = 1"
)
_INSERT_SQL = (
    f"INSERT OR IGNORE INTO tool_invocation ({', '.join(COLUMNS + STAGE_COLUMNS)}, {KEYWORDS_COLUMN}) "
    f"SELECT c.id, s.created_at, {', '.join(f'c.{col}' for col in COLUMNS[2:])}, "
    f"{', '.join(f's.{col}' for col in STAGE_COLUMNS)}, from_json(s.keywords, '{KEYWORD_TYPE}') "
    f"FROM incoming_chunk c JOIN {STAGED} s ON c.id IS NOT DISTINCT FROM s.id RETURNING id"
)


def chunk_bytes(budget: DbBudget) -> int:
    """The input bytes of one insert chunk: memory stays flat whatever the spool or table holds."""
    return max(CHUNK_BYTES[0], min(CHUNK_BYTES[1], budget.memory_bytes // 32))


def insert_rows(con: duckdb.DuckDBPyConnection, rows: pa.Table, *, max_bytes: int = CHUNK_BYTES[1]) -> int:
    """Insert the rows (COLUMNS, JSON columns as text) whose id is not stored yet, with their typed stage
    columns and child rows, a chunk of at most `max_bytes` at a time, each chunk in one transaction (a replay
    adds nothing twice, so a chunk that fails leaves nothing half-done). Returns the rows added."""
    # Each commit of a chunk wrote its rows to the WAL, and every other one checkpointed: a checkpoint compresses
    # the table's last row group (122,880 rows) anew, so the cost per row grew with the group. Checkpointing
    # after several chunks' worth (an eighth of the budget with the default chunk) rewrites it less often.
    con.execute(f"SET checkpoint_threshold = '{WAL_CHUNKS * max_bytes}B'")
    con.execute(f"SET auto_checkpoint_skip_wal_threshold = {2**62}")
    added, start = 0, 0
    per_row = max(1, rows.nbytes // max(1, rows.num_rows))
    step = max(1, max_bytes // per_row)
    while start < rows.num_rows:
        added += _insert_chunk(con, rows.slice(start, step))
        start += step
    return added


def _insert_chunk(con: duckdb.DuckDBPyConnection, chunk: pa.Table) -> int:
    # INSERT OR IGNORE skips ids already stored, and the second of an id repeated in the chunk, through the primary
    # key's index; the stage holds one row per id, trimmed to the ids inserted before their children are written.
    con.register("incoming_chunk", chunk)
    try:
        with transaction(con):
            con.execute(_STAGE_SQL)
            inserted = con.execute(_INSERT_SQL).fetchall()
            ((staged,),) = con.execute(f"SELECT count(*) FROM {STAGED}").fetchall()
            if len(inserted) < staged:  # some were stored already: so are their children
                con.register("inserted_ids", pa.table({"id": [r[0] for r in inserted]}))
                con.execute(f"DELETE FROM {STAGED} WHERE id NOT IN (SELECT id FROM inserted_ids)")
                con.unregister("inserted_ids")
            if inserted:
                derive_children(con, STAGED)
                add_to_rollup(con, STAGED)
            con.execute(f"DROP TABLE {STAGED}")
    finally:
        con.unregister("incoming_chunk")
    return len(inserted)
