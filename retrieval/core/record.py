"""What one lookup_knowledge call leaves behind: the `tool_invocation` row as a frozen record. The lookup builds
it; the invocation store (retrieval.records.invocations) writes it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

TOOL_NAME = "lookup_knowledge"
STAGES = ("l0", "embed", "l1", "fuse")  # the per-stage timings lookup_knowledge keeps in retrieval_details


@dataclass(frozen=True)
class InvocationRecord:
    """One row of tool_invocation. `result` and `retrieval_details` are JSON-ready dicts."""

    id: str
    created_at: str  # ISO 8601, UTC
    tool_name: str
    input: str
    status: str
    layer: str
    latency_ms: float
    result: dict[str, Any]
    retrieval_details: dict[str, Any]
    error: str | None
    session_tag: str
    domain: str | None
    l1_status: str | None
    fallback: bool
    top_entry_id: str | None

    def to_dict(self) -> dict[str, Any]:
        # Shallow: dataclasses.asdict deep-copied result and retrieval_details on every record(), which
        # was most of what recording cost.
        return {f.name: getattr(self, f.name) for f in fields(self)}


def new_invocation_id() -> str:
    """A UUIDv7 (RFC 9562) as 32 hex digits: the creation millisecond first, then 74 random bits. Ids sort in the
    order calls were made, so the store's newest rows and their keyword and result rows sit together in the file, and
    a filtered query of the Invocations page skips the older row groups by their id ranges."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a, rand_b = rand >> 68, rand & ((1 << 62) - 1)  # 12 and 62 random bits
    return f"{(ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b:032x}"


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat()
