"""The typed parts of a row (stage timings, matched keywords, results) taken from its parsed JSON, and a table
without them stored as one with them: the insert never depends on who took the parts."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from retrieval.records.invocations import InvocationStore, insert_rows, spool_line, spool_table
from retrieval.records.parts import row_parts, with_parts
from retrieval.records.schema import COLUMNS, PART_COLUMNS

from ..helpers.records import make_record


def test_parts_of_a_recorded_row():
    rec = make_record(3)
    parts = row_parts(rec.result, rec.retrieval_details)
    assert set(parts) == set(PART_COLUMNS)
    assert (parts["l0_ms"], parts["l1_ms"], parts["embed_ms"]) == (0.4, 11.2, None)  # no embed timing recorded
    assert parts["l0_keywords"] == [
        {"term": "replica lag", "field": "keywords", "weight": 1.0},
        {"term": "Postgres", "field": "entities", "weight": 0.5},
    ]
    assert parts["results"] == [{"entry_id": "rb-3", "domain": None, "source": "L1", "score": 0.75}]


def test_parts_of_malformed_json_are_missing_not_an_error():
    details = {"timings_ms": {"l0": "1.5", "l1": "fast", "embed": [1]}, "l0": {"matched_keywords": "replica"}}
    parts = row_parts({"results": [{"entry_id": 7, "score": "high"}, "stray"]}, details)
    assert (parts["l0_ms"], parts["l1_ms"], parts["embed_ms"]) == (1.5, None, None)  # as TRY_CAST reads them
    assert parts["l0_keywords"] is None
    assert parts["results"] == [{"entry_id": "7", "domain": None, "source": None, "score": None}, None]
    assert row_parts(None, "not a dict") == {c: None for c in PART_COLUMNS}


def test_parts_read_from_json_text_equal_the_spools():
    records = [make_record(i) for i in range(6)]
    spooled, bad = spool_table([spool_line(r) for r in records])
    assert bad == 0 and spooled.column_names == [*COLUMNS, *PART_COLUMNS]
    text_only = spooled.select(list(COLUMNS))
    assert with_parts(text_only).equals(spooled)
    assert with_parts(spooled) is spooled  # parts present: nothing is parsed again
    broken = text_only.set_column(COLUMNS.index("retrieval_details"), "retrieval_details", pa.array(["{oops"] * 6))
    assert with_parts(broken).column("l0_keywords").null_count == 6  # stored without parts, not refused


def stored(store: InvocationStore) -> list[tuple]:
    return [
        (r[0], r[1], r[2], str(r[3]), list(r[4]), r[5])
        for r in store.query(
            "SELECT t.id, t.l0_ms, t.l1_ms, t.l0_keywords, (SELECT list(entry_id ORDER BY rank) FROM invocation_result r "
            "WHERE r.invocation_id = t.id), (SELECT count(*) FROM invocation_keyword k WHERE k.invocation_id = t.id) "
            "FROM tool_invocation t ORDER BY t.input",
            flush_first=False,
        ).itertuples(index=False)
    ]


def test_a_table_without_parts_is_stored_as_one_with_them(tmp_path):
    records = [make_record(i) for i in range(5)]
    records[2] = replace(records[2], result={"results": [{"entry_id": "a"}, {"entry_id": "b", "score": 0.5}]})
    spooled, _ = spool_table([spool_line(r) for r in records])
    with_them, without = InvocationStore(tmp_path / "a.duckdb"), InvocationStore(tmp_path / "b.duckdb")
    assert with_them.with_connection(lambda con: insert_rows(con, spooled), read_only=False) == 5
    assert without.with_connection(lambda con: insert_rows(con, spooled.select(list(COLUMNS))), read_only=False) == 5
    rows = stored(with_them)
    assert [r[4] for r in rows] == [["rb-0"], ["rb-1"], ["a", "b"], ["rb-3"], ["rb-4"]]
    assert {r[5] for r in rows} == {2}
    assert rows == stored(without)
