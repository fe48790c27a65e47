"""An older file's traffic columns are filled from each row's JSON as a new row's are taken from it (same values)."""

from __future__ import annotations

from dataclasses import replace

from retrieval.records.invocations import InvocationStore
from retrieval.records.parts import row_parts
from retrieval.records.schema import TRAFFIC_COLUMNS
from retrieval.traffic import features

from ..helpers.records import make_record, write_old_layout

FIT = {"model": "labelled", "baselines": {"kind": "self", "id": "3f09c1a2b4d5", "probes": 40}}


def varied_records():
    """Rows whose relevance, L0 part and results vary, some of them malformed."""
    base = make_record(0)
    details = base.retrieval_details
    titled = {**details["l0"], "matches": [{"entry_id": "a", "named": True}], "matched_titles": ["Disk full"]}
    odd = {"confidence": "0.5", "semantic_support": "yes", "fit": {"baselines": {"kind": "reference"}}}
    return [
        replace(
            base,
            retrieval_details={
                **details,
                "collection": "Kb_x",
                "relevance": {"confidence": 0.81, "semantic_support": True, "fit": FIT},
            },
        ),
        replace(
            make_record(1),
            result={"results": [{"entry_id": "a", "domain": "storage"}]},
            retrieval_details={**details, "l0": titled, "relevance": {"confidence": 0.2, "semantic_support": False}},
        ),
        replace(
            make_record(2), result={"results": []}, retrieval_details={**details, "l0": {"matches": [], "matched_titles": []}}
        ),
        replace(make_record(3), retrieval_details={"l0": {"matches": "x"}, "relevance": odd}),
        replace(make_record(4), result={"results": ["stray"]}, retrieval_details={"relevance": None}),
    ]


def traffic_of(store: InvocationStore) -> dict[str, tuple]:
    sql = f"SELECT id, {', '.join(TRAFFIC_COLUMNS)} FROM tool_invocation"
    return {r[0]: tuple(r[1:]) for r in store.with_connection(lambda con: con.execute(sql).fetchall(), read_only=True)}


def test_traffic_columns_name_what_traffic_reads():
    assert TRAFFIC_COLUMNS == features.TRAFFIC_COLUMNS


def test_an_older_file_gets_the_traffic_columns_from_its_json(db_path):
    recs = varied_records()
    write_old_layout(db_path, recs)  # the layout before: the JSON alone
    store = InvocationStore(db_path)
    backfilled = traffic_of(store)
    taken = {r.id: tuple(row_parts(r.result, r.retrieval_details)[c] for c in TRAFFIC_COLUMNS) for r in recs}
    assert backfilled == taken
    assert taken[recs[0].id] == (0.81, True, "self:3f09c1a2b4d5", True, False, None, "Kb_x")  # no match by name
    assert taken[recs[1].id][:6] == (0.2, False, None, True, True, "storage")
    assert taken[recs[3].id][:4] == (0.5, None, "reference", None)  # text read as TRY_CAST does; "yes" is no claim


def test_new_rows_store_their_traffic_columns(db_path):
    recs = varied_records()
    store = InvocationStore(db_path)
    for rec in recs:
        store.record(rec)
    store.flush()
    stored = traffic_of(store)
    assert stored == {r.id: tuple(row_parts(r.result, r.retrieval_details)[c] for c in TRAFFIC_COLUMNS) for r in recs}
