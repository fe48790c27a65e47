"""The L0-domain -> L1 filter decision: one small pure function."""

from __future__ import annotations

from collections.abc import Iterable


def category_filter(domains: Iterable[str]) -> str | None:
    """The category L1 must filter on, or None to run unfiltered.

    Exactly one distinct nonblank domain -> that domain. Zero, or several -> None.
    """
    distinct = {d.strip() for d in domains if d and d.strip()}
    return distinct.pop() if len(distinct) == 1 else None


def describe_routing(domains: Iterable[str]) -> str:
    """The routing decision in words, for people."""
    domains = [d.strip() for d in domains if d and d.strip()]
    chosen = category_filter(domains)
    if chosen is not None:
        return f"one domain: {chosen} → L1 filtered on category = {chosen}"
    if not domains:
        return "no L0 domain → L1 unfiltered"
    return f"{len(set(domains))} domains ({', '.join(sorted(set(domains)))}) → L1 unfiltered"
