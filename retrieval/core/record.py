"""What one lookup_knowledge call leaves behind: the `tool_invocation` row as a frozen record. The lookup builds
it; the invocation store (retrieval.records.invocations) writes it."""

from __future__ import annotations

import uuid
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
    return uuid.uuid4().hex


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat()
