"""What traffic reads of a recorded call beyond its typed columns: the support estimate, its threshold and whether the
query names an entry, read from retrieval_details in one place (to swap for typed columns where they exist)."""

from __future__ import annotations

NO_DOMAIN = "(no result)"  # the top domain of a call that returned no result


def signals_sql(row: str) -> dict[str, str]:
    """SQL expressions over the tool_invocation row `row`: support, threshold and names_entry."""
    details = f"{row}.retrieval_details"
    return {
        "support": f"TRY_CAST(json_extract_string({details}, '$.relevance.confidence') AS DOUBLE)",
        "threshold": f"TRY_CAST(json_extract_string({details}, '$.relevance.threshold') AS DOUBLE)",
        "names_entry": f"coalesce(json_array_length(json_extract({details}, '$.l0.matched_titles')) > 0, false)",
    }
