"""The time range of a page's window of calls: a span back from now, every call, or custom dates (UTC, both days in)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

Span = timedelta | str | None  # a span back from now, "custom" (dates picked), or None (all time)


def bounds(span: Span, picked: Sequence[date]) -> tuple[datetime | None, datetime | None]:
    """(since, until) of the span; custom dates give from the first day's start to the end of the second."""
    if isinstance(span, timedelta):
        return datetime.now(UTC) - span, None
    if span != "custom" or len(picked) != 2:
        return None, None
    start = datetime.combine(picked[0], time.min, tzinfo=UTC)
    return start, datetime.combine(picked[1], time.min, tzinfo=UTC) + timedelta(days=1)
