"""Invocation records made by hand for the store's tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import duckdb

from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.records import invocations as inv


# --- helpers -----------------------------------------------------------------------------------------
def make_record(i: int = 0, **overrides) -> InvocationRecord:
    """A full tool_invocation row; nested dicts in result and retrieval_details like lookup.to_record makes."""
    rec = InvocationRecord(
        id=new_invocation_id(),
        created_at=utc_now_iso(),
        tool_name=TOOL_NAME,
        input=f"query {i}: Postgres replica lag > 30s — “what now?”",
        status="ok",
        layer="L0+L1" if i % 2 else "L0",
        latency_ms=12.5 + i,
        result={
            "results": [{"entry_id": f"rb-{i}", "title": "Replica lag", "score": 0.75, "source": "L1"}],
            "relevance": {"verdict": "relevant", "best": 0.75},
        },
        retrieval_details={
            "layer": "L0+L1",
            "routing": {"mode": "hybrid", "reasons": ["l0 hit", "l1 ok"]},
            "fallback": False,
            "l0": {
                "domains": ["databases", "postgres"],
                "matches": [{"entry_id": f"rb-{i}", "score": 2.0}, {"entry_id": "rb-x", "score": 1.5}],
                "matched_keywords": [
                    {"term": "replica lag", "field": "keywords", "weight": 1.0},
                    {"term": "Postgres", "field": "entities", "weight": 0.5},
                ],
            },
            "l1": {"status": "ok", "category": "databases", "filter": {"domain": "databases"}, "error": None},
            "timings_ms": {"l0": 0.4, "l1": 11.2, "total": 12.5 + i},
        },
        error=None,
        session_tag="test",
        domain="databases",
        l1_status="ok",
        fallback=False,
        top_entry_id=f"rb-{i}",
    )
    return replace(rec, **overrides)


def write_old_layout(db_path: Path, records: Iterable[InvocationRecord]) -> None:
    """A file as the store wrote it before the typed tables and columns: tool_invocation alone, the JSON only."""
    with duckdb.connect(str(db_path)) as con:
        con.execute(inv.SCHEMA)
        for rec in records:
            row = rec.to_dict()
            con.execute(
                f"INSERT INTO tool_invocation VALUES ({', '.join('?' for _ in inv.COLUMNS)})",
                [json.dumps(row[c]) if c in ("result", "retrieval_details") else row[c] for c in inv.COLUMNS],
            )
