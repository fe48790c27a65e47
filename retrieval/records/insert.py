"""Inserting invocation rows: Arrow tables of COLUMNS with their typed parts (retrieval.records.parts) into
tool_invocation, its child tables and rollups, a chunk at a time, each chunk in one transaction, only ids not stored yet.
The insert parses no JSON: the typed parts come with the rows.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from retrieval.records.parts import with_parts
from retrieval.records.rollup import add_to_rollup
from retrieval.records.schema import (
    COLUMNS,
    KEYWORDS_COLUMN,
    RESULTS_PART,
    ROW_GROUP_ROWS,
    STORED_PARTS,
    derive_children,
    transaction,
)
from retrieval.types.budget import DbBudget

CHUNK_BYTES = (1 << 20, 128 << 20)  # an insert chunk's input: 1/8 of the memory budget, within these bounds
INCOMING = "incoming_chunk"  # the registered Arrow chunk
INSERTED = "inserted_chunk"  # ... trimmed to the rows to add, when it repeats ids or holds stored ones

_ROW_SQL = (  # an incoming row as the tables and rollups read it
    f"SELECT id, CAST(created_at AS TIMESTAMPTZ) AS created_at, {', '.join(COLUMNS[2:])}, "
    f"{', '.join(STORED_PARTS)}, {KEYWORDS_COLUMN} AS keywords, {RESULTS_PART} FROM {INCOMING}"
)
_INSERT_SQL = (  # a plain INSERT: INSERT OR IGNORE took twice its time (and wrote no row group straight to the file)
    f"INSERT INTO tool_invocation ({', '.join(COLUMNS + STORED_PARTS)}) "
    f"SELECT {', '.join(COLUMNS + STORED_PARTS)} FROM {{source}}"
)
# The chunk's ids stored already (a spool replayed): ids lead with their call's time (UUIDv7), so the range skips
# every row group of older calls by its zone map, and new rows cost a look at the newest group.
_STORED_SQL = f"SELECT id FROM tool_invocation WHERE id BETWEEN ? AND ? AND id IN (SELECT id FROM {INCOMING})"


def chunk_bytes(budget: DbBudget) -> int:
    """The input bytes of one insert chunk: memory stays flat whatever the spool or table holds."""
    return max(CHUNK_BYTES[0], min(CHUNK_BYTES[1], budget.memory_bytes // 8))


def chunk_rows(per_row: int, max_bytes: int, parallel: int = 1) -> int:
    """The rows of one chunk: whole row groups when `max_bytes` holds one (a full group is written straight to the file, a
    partial one goes through the WAL and is recompressed at each checkpoint), up to `parallel` groups (DuckDB's threads,
    one group each) as twice `max_bytes` holds."""
    per_row = max(1, per_row)
    fits = max(1, max_bytes // per_row)
    groups = fits // ROW_GROUP_ROWS
    if 1 <= groups < parallel:
        groups = min(parallel, 2 * max_bytes // (ROW_GROUP_ROWS * per_row))
    return groups * ROW_GROUP_ROWS or fits


def insert_rows(con: duckdb.DuckDBPyConnection, rows: pa.Table, *, max_bytes: int = CHUNK_BYTES[1]) -> int:
    """Insert the rows (COLUMNS and their typed parts, else read from the JSON) whose id is not stored yet, with their child
    rows, a chunk of at most `max_bytes` per transaction (a failed chunk leaves nothing half-done). Returns the rows added."""
    # A chunk of whole row groups is written to the file at its commit; only a part of a group (a flush's last
    # rows) goes to the WAL, and a checkpoint compresses the table's last row group anew. Checkpointing after a
    # chunk's worth of WAL (an eighth of the budget) instead of DuckDB's 16 MB rewrites that group less often.
    con.execute(f"SET checkpoint_threshold = '{max_bytes}B'")
    con.execute(f"SET auto_checkpoint_skip_wal_threshold = {2**62}")
    # A chunk's row groups are written by DuckDB's threads side by side (one record batch each) when the order of
    # the rows within the chunk may change: ids and times order them where it matters.
    con.execute("SET preserve_insertion_order = false")
    added, start = 0, 0
    ((threads,),) = con.execute("SELECT current_setting('threads')").fetchall()
    step = chunk_rows(rows.nbytes // max(1, rows.num_rows), max_bytes, int(threads))
    try:
        while start < rows.num_rows:
            chunk = with_parts(rows.slice(start, step)).combine_chunks()
            added += _insert_chunk(con, pa.Table.from_batches(chunk.to_batches(max_chunksize=ROW_GROUP_ROWS)))
            start += step
    finally:
        con.execute("RESET preserve_insertion_order")
    return added


def _insert_chunk(con: duckdb.DuckDBPyConnection, chunk: pa.Table) -> int:
    # The rows to add are the chunk's, less the ids stored already and the second of an id it repeats; their
    # children and rollups are read from the same rows.
    con.register(INCOMING, chunk)
    try:
        with transaction(con):
            low, high = pc.min_max(chunk.column("id")).values()
            stored = con.execute(_STORED_SQL, [low.as_py(), high.as_py()]).fetchall()
            source, added = f"({_ROW_SQL})", chunk.num_rows
            if stored or pc.count_distinct(chunk.column("id")).as_py() < chunk.num_rows:
                con.register("stored_ids", pa.table({"id": pa.array([r[0] for r in stored], pa.string())}))
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {INSERTED} AS SELECT * FROM {source} "
                    "WHERE id NOT IN (SELECT id FROM stored_ids) QUALIFY row_number() OVER (PARTITION BY id) = 1"
                )
                con.unregister("stored_ids")
                source = INSERTED
                ((added,),) = con.execute(f"SELECT count(*) FROM {INSERTED}").fetchall()
            if added:
                con.execute(_INSERT_SQL.format(source=source))
                derive_children(con, source)
                add_to_rollup(con, source)
            con.execute(f"DROP TABLE IF EXISTS {INSERTED}")
    finally:
        con.unregister(INCOMING)
    return int(added)
