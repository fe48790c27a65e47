"""read_entry calls of the MCP server, in their own table `entry_read`: which client read which entry when, so a session's
lookups can be joined to what the agent then opened. Not in `tool_invocation`, whose rows are all lookups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from retrieval.records.invocations import InvocationStore

TABLE = "entry_read"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    entry_id VARCHAR NOT NULL,
    title VARCHAR,
    domain VARCHAR,
    session_tag VARCHAR NOT NULL,
    latency_ms DOUBLE
)"""


class ReadLog:
    """Records each read_entry answer through the lookup's own invocation store (when it records)."""

    def record(self, recorder: InvocationStore | None, payload: dict[str, Any], session_tag: str, seconds: float) -> str | None:
        """The row's id, or None when the lookup's services record nothing (no recorder)."""
        if recorder is None:
            return None
        from retrieval.core.record import new_invocation_id, utc_now_iso

        row = [
            new_invocation_id(),
            utc_now_iso(),
            payload["entry_id"],
            payload.get("title"),
            payload.get("domain"),
            session_tag,
            round(seconds * 1000, 3),
        ]

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(SCHEMA)
            con.execute(f"INSERT INTO {TABLE} VALUES (?, CAST(? AS TIMESTAMPTZ), ?, ?, ?, ?, ?)", row)

        recorder.with_connection(insert, read_only=False)
        return row[0]
