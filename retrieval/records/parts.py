"""The typed parts of an invocation row kept beside its JSON (stage timings, L0 matched keywords, what traffic reads,
results), read where the spool's flush parses the row anyway, so that DuckDB need not parse the JSON again.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from retrieval.core.record import STAGES
from retrieval.records.schema import KEYWORDS_COLUMN, PART_COLUMNS, RESULTS_PART, SPOOL_SCHEMA, STAGE_COLUMNS, TRAFFIC_COLUMNS


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode() if isinstance(value, dict | list) else str(value)


def _number(value: Any) -> float | None:
    """As DuckDB's TRY_CAST(... AS DOUBLE) reads a JSON value: numbers and numeric text, else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _items(value: Any, keys: tuple[str, ...], numeric: str) -> list[dict[str, Any] | None] | None:
    if not isinstance(value, list):
        return None
    return [
        {k: _number(item.get(k)) if k == numeric else _text(item.get(k)) for k in keys} if isinstance(item, dict) else None
        for item in value
    ]


def _nonempty(value: Any) -> bool | None:
    return bool(value) if isinstance(value, list) else None


def fit_text(fit: Any) -> str | None:
    """Which fit gave a support estimate, as short text: its baselines' kind and id ("self:3f09c1a2b4d5")."""
    base = fit.get("baselines") if isinstance(fit, dict) else None
    if not isinstance(base, dict):
        return None
    return ":".join(t for t in (_text(base.get("kind")), _text(base.get("id"))) if t is not None) or None


def _any_named(matches: Any) -> bool | None:
    """Whether L0 matched an entry by its whole title or file name (a match's `named`), as the traffic reads it."""
    return any(isinstance(m, dict) and m.get("named") is True for m in matches) if isinstance(matches, list) else None


def traffic_parts(result: Any, details: dict[str, Any]) -> tuple[Any, ...]:
    """TRAFFIC_COLUMNS of one row, as the schema's TRAFFIC_SQL reads them from an older row's JSON."""
    relevance, l0 = details.get("relevance"), details.get("l0")
    relevance = relevance if isinstance(relevance, dict) else {}
    l0 = l0 if isinstance(l0, dict) else {}
    results = result.get("results") if isinstance(result, dict) else None
    first = results[0] if isinstance(results, list) and results else None
    supported = relevance.get("semantic_support")
    return (
        _number(relevance.get("confidence")),
        supported if isinstance(supported, bool) else None,
        fit_text(relevance.get("fit")),
        _nonempty(l0.get("matches")),
        _any_named(l0.get("matches")),
        _text(first.get("domain")) if isinstance(first, dict) else None,
        _text(details.get("collection")),
    )


def _loads(text: str | None) -> Any:
    try:
        return None if text is None else orjson.loads(text)
    except orjson.JSONDecodeError:
        return None  # not JSON: the row is stored as it is, without the parts


def row_parts(result: Any, details: Any) -> dict[str, Any]:
    """PART_COLUMNS of one row from its parsed `result` and `retrieval_details` (either may be None or malformed:
    what is missing is None)."""
    details = details if isinstance(details, dict) else {}
    timings = details.get("timings_ms")
    timings = timings if isinstance(timings, dict) else {}
    l0 = details.get("l0")
    keywords = l0.get("matched_keywords") if isinstance(l0, dict) else None
    results = result.get("results") if isinstance(result, dict) else None
    return {
        **{column: _number(timings.get(stage)) for column, stage in zip(STAGE_COLUMNS, STAGES, strict=True)},
        KEYWORDS_COLUMN: _items(keywords, ("term", "field", "weight"), "weight"),
        **dict(zip(TRAFFIC_COLUMNS, traffic_parts(result, details), strict=True)),
        RESULTS_PART: _items(results, ("entry_id", "domain", "source", "score"), "score"),
    }


def parts_table(results: list[Any], details: list[Any]) -> pa.Table:
    """PART_COLUMNS of rows given their parsed `result` and `retrieval_details`."""
    columns: dict[str, list[Any]] = {c: [] for c in PART_COLUMNS}
    for result, detail in zip(results, details, strict=True):
        for column, value in row_parts(result, detail).items():
            columns[column].append(value)
    return pa.Table.from_pydict(columns, schema=pa.schema([SPOOL_SCHEMA.field(c) for c in PART_COLUMNS]))


def with_parts(rows: pa.Table) -> pa.Table:
    """`rows` with PART_COLUMNS: as they are when the table has them all, else read from its JSON text columns."""
    if all(c in rows.column_names for c in PART_COLUMNS):
        return rows
    kept = rows.drop_columns([c for c in PART_COLUMNS if c in rows.column_names])

    def parsed(column: str) -> list[Any]:
        return [_loads(v) for v in kept.column(column).to_pylist()]

    parts = parts_table(parsed("result"), parsed("retrieval_details"))
    for name in parts.column_names:
        kept = kept.append_column(parts.field(name), parts.column(name))
    return kept
