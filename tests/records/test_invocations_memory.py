"""The invocation store within its memory budget: inserts in bounded chunks, a big spool flushed with flat memory.

Real DuckDB files; the 200k-row spool is recorded and flushed by a separate process (tests/helpers/spool_flush.py)
whose peak RSS during the flush is read from /proc (VmHWM, reset just before the flush)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from retrieval.records.insert import chunk_rows
from retrieval.records.invocations import InvocationStore, chunk_bytes, insert_rows, spool_line, spool_table
from retrieval.records.schema import ROW_GROUP_ROWS
from retrieval.records.spool import spooled_chunks
from retrieval.types.budget import DbBudget

from ..helpers.records import make_record

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "spool_flush.py"
# What the flushing process may add beside DuckDB's budget: the interpreter's own, and a chunk (1/8 of the budget)
# held a few times over while it is read: as lines, as the text and typed parts taken from them, as Arrow, as
# DuckDB's copy (measured: 2 MB chunks grew the process 116 MB in all, 8 MB chunks 158-166 MB).
PYTHON_SHARE_MB = 96 + 6 * 8


def table_of(records) -> pa.Table:
    table, bad = spool_table([spool_line(r) for r in records])
    assert bad == 0
    return table


def counts(store: InvocationStore) -> tuple[int, int, int]:
    row = store.query(
        "SELECT (SELECT count(*) FROM tool_invocation), (SELECT count(*) FROM invocation_result), "
        "(SELECT count(*) FROM invocation_keyword)",
        flush_first=False,
    ).iloc[0]
    return int(row.iloc[0]), int(row.iloc[1]), int(row.iloc[2])


def test_chunk_size_follows_the_budget_within_bounds():
    assert chunk_bytes(DbBudget("64MB")) == 8 * 10**6
    assert chunk_bytes(DbBudget("16MB")) == 2 * 10**6  # the smallest budget
    assert chunk_bytes(DbBudget("100GB")) == 128 * 2**20


def test_a_chunk_is_whole_row_groups_where_one_fits():
    assert chunk_rows(26_000, 128 << 20) == 2 * ROW_GROUP_ROWS  # 5,162 rows fit: two whole groups, not a part
    assert chunk_rows(26_000, 60 << 20) == ROW_GROUP_ROWS
    assert chunk_rows(26_000, 8 << 20) == 322  # less than a group fits: as many rows as fit
    assert chunk_rows(10**9, 1 << 20) == 1


def test_a_chunk_holds_a_row_group_for_each_thread_when_twice_the_budget_holds_them():
    assert chunk_rows(37_000, 128 << 20) == ROW_GROUP_ROWS  # one thread: one whole group
    assert chunk_rows(37_000, 128 << 20, parallel=2) == 2 * ROW_GROUP_ROWS  # 152 MB, within twice 128 MB
    assert chunk_rows(26_000, 128 << 20, parallel=2) == 2 * ROW_GROUP_ROWS  # two fit anyway
    assert chunk_rows(37_000, 128 << 20, parallel=4) == 3 * ROW_GROUP_ROWS  # four groups, 303 MB: three fit in 256 MB
    assert chunk_rows(70_000, 128 << 20, parallel=2) == 1917  # not one group fits: as many rows as fit
    assert chunk_rows(26_000, 8 << 20, parallel=2) == 322  # not one group fits: as before


def test_rows_inserted_in_chunks_arrive_once_with_their_child_rows(db_path):
    store = InvocationStore(db_path, budget=DbBudget("64MB", 1))
    records = [make_record(i) for i in range(30)]
    table = table_of(records)
    per_row = table.nbytes // table.num_rows
    added = store.with_connection(lambda con: insert_rows(con, table, max_bytes=per_row * 4), read_only=False)
    assert added == 30
    one = counts(store)
    assert one[0] == 30 and one[1] == 30 * len(records[0].result["results"])
    assert one[2] == 30 * len(records[0].retrieval_details["l0"]["matched_keywords"])
    # again, in other chunks, with a new row and a repeat inside one chunk: only the new row and its children
    new = make_record(99)
    again = table_of([*records[:7], new, new, *records[7:]])
    assert store.with_connection(lambda con: insert_rows(con, again, max_bytes=per_row * 5), read_only=False) == 1
    assert counts(store) == (31, one[1] + 1, one[2] + len(new.retrieval_details["l0"]["matched_keywords"]))
    timings = store.query("SELECT l0_ms, l1_ms, embed_ms FROM tool_invocation WHERE id = ?", [new.id], flush_first=False)
    spent = new.retrieval_details["timings_ms"]
    assert timings.iloc[0].tolist()[:2] == [spent["l0"], spent["l1"]] and pd.isna(timings.iloc[0, 2])  # no embed timing


def test_a_chunk_that_fails_leaves_nothing_of_itself(db_path):
    store = InvocationStore(db_path, budget=DbBudget("64MB", 1))
    good = [make_record(i) for i in range(4)]
    broken = replace(make_record(9), id=None)  # type: ignore[arg-type]  # id is NOT NULL: the INSERT fails
    table = table_of([*good, broken])
    with pytest.raises(duckdb.ConstraintException, match=re.escape("NOT NULL constraint failed: tool_invocation.id")):
        store.with_connection(lambda con: insert_rows(con, table, max_bytes=table.nbytes // 5 * 2), read_only=False)
    calls, results, _ = counts(store)
    assert calls == 4  # the two chunks before the broken one, whole
    assert results == 4 * len(good[0].result["results"])


def test_the_spool_is_read_a_chunk_at_a_time(tmp_path):
    lines = [spool_line(make_record(i)) for i in range(40)]
    (tmp_path / "a.claimed").write_bytes(b"".join(lines[:25]))
    (tmp_path / "b.claimed").write_bytes(b"".join(lines[25:]))
    limit = 3 * len(lines[0])
    chunks = list(spooled_chunks([tmp_path / "a.claimed", tmp_path / "b.claimed"], limit))
    assert [line for chunk in chunks for line in chunk] == lines
    assert all(sum(map(len, chunk)) < limit + max(map(len, lines)) for chunk in chunks)
    assert len(chunks) >= 40 // 4
    whole = list(spooled_chunks([tmp_path / "a.claimed", tmp_path / "b.claimed"], 7 * len(lines[0]), 3))
    assert [line for chunk in whole for line in chunk] == lines
    assert [len(chunk) % 3 for chunk in whole[:-1]] == [0] * (len(whole) - 1)  # each cut at a multiple of 3 lines


@pytest.mark.slow
def test_a_200k_row_spool_flushes_within_a_64mb_budget(tmp_path):
    """Every row arrives, and the flushing process grows by no more than the budget and the Python side's share
    (before the chunks, one flush parsed the whole spool into Python rows and a DataFrame: over 1 GB here)."""
    proc = subprocess.run(
        [sys.executable, str(HELPER), str(tmp_path / "inv.duckdb"), "200000", "64MB"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    fig = json.loads(proc.stdout.strip().splitlines()[-1])
    print(fig)
    assert fig["flushed"] == fig["calls"] == fig["timed"] == 200_000
    assert fig["results"] == 5 * 200_000 and fig["keywords"] == 4 * 200_000
    assert fig["spool_mb"] > 200  # the spool is several times the budget
    grown = fig["peak_in_flush_mb"] - fig["rss_before_flush_mb"]
    assert grown <= 64 + PYTHON_SHARE_MB, fig
