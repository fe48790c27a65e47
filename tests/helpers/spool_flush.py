"""A separate process that records ROWS invocations into a store with a small memory budget, then flushes
them, and prints its memory as JSON: the test reads a clean peak RSS, without pytest's own memory.

    python spool_flush.py DB_PATH ROWS MEMORY_LIMIT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import reset_peak, status_kb

from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.records.invocations import InvocationStore
from retrieval.types.budget import DbBudget


def record(i: int) -> InvocationRecord:
    """A row shaped like lookup_knowledge's, about 1.5 KB of JSON."""
    results = [{"entry_id": f"kb/e{(i + r) % 997}", "domain": "db", "source": "L1", "score": 0.9 - r / 10} for r in range(5)]
    keywords = [{"term": f"term{(i + k) % 50}", "field": "keyword", "weight": 2.5} for k in range(4)]
    return InvocationRecord(
        id=new_invocation_id(),
        created_at=utc_now_iso(),
        tool_name=TOOL_NAME,
        input=f"replica lag on postgres node {i}",
        status="ok",
        layer="L0+L1",
        latency_ms=20.0 + i % 7,
        result={"results": results, "relevance": {"level": "high", "reason": "support " * 10}},
        retrieval_details={
            "l0": {"matched_keywords": keywords, "domains": ["db"], "matches": results},
            "l1": {"status": "ok", "filter": {"category": "db"}, "hits": results},
            "timings_ms": {"l0": 0.4, "embed": 6.0, "l1": 9.5, "fuse": 0.2},
        },
        error=None,
        session_tag="memory-test",
        domain="db",
        l1_status="ok",
        fallback=False,
        top_entry_id=results[0]["entry_id"],
    )


def main() -> None:
    db_path, rows, memory_limit = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    store = InvocationStore(db_path, budget=DbBudget(memory_limit, 2))
    for i in range(rows):
        store.record(record(i))
    spool_mb = sum(p.stat().st_size for p in store.spool_dir.iterdir()) / 2**20
    before_kb = reset_peak()
    flushed = store.flush()
    peak_kb = status_kb("VmHWM")
    counts = store.query(
        "SELECT (SELECT count(*) FROM tool_invocation) AS calls, (SELECT count(*) FROM invocation_result) AS results, "
        "(SELECT count(*) FROM invocation_keyword) AS keywords, (SELECT count(l1_ms) FROM tool_invocation) AS timed",
        flush_first=False,
    ).iloc[0]
    print(
        json.dumps(
            {
                "flushed": flushed,
                "spool_mb": round(spool_mb, 1),
                "rss_before_flush_mb": round(before_kb / 1024, 1),
                "peak_in_flush_mb": round(peak_kb / 1024, 1),
                **{k: int(v) for k, v in counts.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
