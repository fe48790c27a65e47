"""The signals traffic reads of a recorded call, over a real DuckDB file: the support estimate, its threshold and whether
the query names an entry, NULL or false where the call made none."""

from __future__ import annotations

from dataclasses import replace

from retrieval.records.call_signals import signals_sql
from retrieval.records.invocations import InvocationStore

from ..helpers.records import make_record


def test_signals_read_from_retrieval_details(db_path):
    store = InvocationStore(db_path)
    base = make_record(1)
    named = {**base.retrieval_details, "relevance": {"confidence": 0.8123, "threshold": 0.55}}
    named["l0"] = {**named["l0"], "matches": [{"entry_id": "k", "named": True}], "matched_titles": ["KubePodCrashLooping"]}
    store.record(replace(base, input="named", retrieval_details=named))
    plain = {**base.retrieval_details, "relevance": {"confidence": None, "threshold": None}}
    store.record(replace(make_record(2), input="plain", retrieval_details=plain))
    store.record(replace(make_record(3), input="old"))  # no relevance, no matched_titles at all
    store.flush()
    s = signals_sql("t")
    rows = store.query(
        f"SELECT input, {s['support']} AS support, {s['threshold']} AS threshold, {s['names_entry']} AS names "
        "FROM tool_invocation t ORDER BY input"
    )
    got = {r.input: (r.support, r.threshold, r.names) for r in rows.itertuples()}
    assert got["named"] == (0.8123, 0.55, True)
    assert all(v != v for v in got["plain"][:2]) and got["plain"][2] is False  # NaN: NULL in the frame
    assert all(v != v for v in got["old"][:2]) and got["old"][2] is False
