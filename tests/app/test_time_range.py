"""The time range of a page's window: a span back from now, all time, custom dates with both days in."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from app_support.time_range import bounds


def test_a_span_reaches_back_from_now_and_all_time_has_no_bounds():
    since, until = bounds(timedelta(days=7), ())
    assert until is None and since is not None
    assert timedelta(days=7) <= datetime.now(UTC) - since < timedelta(days=7, minutes=1)
    assert bounds(None, ()) == (None, None)


def test_custom_dates_hold_both_days_and_need_two():
    since, until = bounds("custom", (date(2026, 3, 1), date(2026, 3, 2)))
    assert (since, until) == (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC))
    assert bounds("custom", (date(2026, 3, 1),)) == (None, None)
