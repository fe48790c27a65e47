"""The spool recorder (retrieval.records.spool.SpoolRecorder) with a real DuckDB store flushing it: a short-lived
process's records are taken once its file is finished; a long-lived one's (`finish_each`) at the next flush."""

from __future__ import annotations

from retrieval.records.invocations import InvocationStore
from retrieval.records.spool import SpoolRecorder

from ..helpers.records import make_record


def _stored(store: InvocationStore) -> set[str]:
    return set(store.query("SELECT id FROM tool_invocation")["id"])


def test_a_short_lived_recorders_rows_wait_until_it_closes(tmp_path):
    db = tmp_path / "inv.duckdb"
    store, recorder = InvocationStore(db), SpoolRecorder(db)
    rec = make_record(1)
    recorder.record(rec)
    store.flush()
    assert rec.id not in _stored(store)  # its file is still open: a flush leaves it alone
    recorder.close()
    store.flush()
    assert rec.id in _stored(store)


def test_a_long_lived_recorder_that_finishes_each_record_is_flushed_at_once(tmp_path):
    db = tmp_path / "inv.duckdb"
    store, recorder = InvocationStore(db), SpoolRecorder(db, finish_each=True)
    first, second = make_record(1), make_record(2)
    recorder.record(first)
    store.flush()
    assert first.id in _stored(store)
    recorder.record(second)  # the next record opens a file of its own, again finished at once
    store.flush()
    assert {first.id, second.id} <= _stored(store)
    assert not list(recorder.spool.folder.glob("*.jsonl"))  # no open file is left behind
