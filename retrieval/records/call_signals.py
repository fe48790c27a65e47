"""What traffic reads of a recorded call: the support estimate and whether the query names an entry from their typed
columns, and the threshold from retrieval_details (no typed column keeps it)."""

from __future__ import annotations

NO_DOMAIN = "(no result)"  # the top domain of a call that returned no result


def signals_sql(row: str) -> dict[str, str]:
    """SQL expressions over the tool_invocation row `row`: support, threshold and names_entry."""
    return {
        "support": f"{row}.support",
        "threshold": f"TRY_CAST(json_extract_string({row}.retrieval_details, '$.relevance.threshold') AS DOUBLE)",
        "names_entry": f"coalesce({row}.names_entry, false)",
    }
