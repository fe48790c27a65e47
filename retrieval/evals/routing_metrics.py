"""Routing metrics that ranx cannot compute: how often the L0 filter applies, is right, excludes every answer,
helps or hurts, falls back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RoutingObservation:
    """What happened to one case's routing, and what was expected."""

    case_id: str
    expected_domain: str | None
    expected_ids: tuple[str, ...]  # relevant entry ids (grade > 0); () when unanswerable
    applied_category: str | None
    fallback: bool = False
    semantic_support: bool = True
    top_entry: str | None = None  # the first result, when known


def routing_metrics(observations: Sequence[RoutingObservation], entry_domains: Mapping[str, str]) -> dict[str, Any]:
    """The routing and support rates of a set of cases (commented below); a rate with an empty denominator is None."""
    n = len(observations)
    applied = [o for o in observations if o.applied_category is not None]
    with_domain = [o for o in applied if o.expected_domain]
    answerable_applied = [o for o in applied if o.expected_ids]
    excluded = [o for o in answerable_applied if all(entry_domains.get(e) != o.applied_category for e in o.expected_ids)]
    unanswerable = [o for o in observations if not o.expected_ids]
    answerable = [o for o in observations if o.expected_ids]
    return {
        "cases": n,
        # cases with an L0-derived filter / all cases
        "filter_applied_rate": _rate(len(applied), n),
        # of the filtered cases that name an expected domain, the share filtered on that domain
        "routing_accuracy": _rate(sum(o.applied_category == o.expected_domain for o in with_domain), len(with_domain)),
        # of the filtered answerable cases, the share whose filter excluded every expected entry (a routing error;
        # whether the case ranked worse for it is filter_verdict's "hurt")
        "filter_excluded_rate": _rate(len(excluded), len(answerable_applied)),
        # cases answered from L0 because L1 gave nothing usable / all cases
        "fallback_rate": _rate(sum(o.fallback for o in observations), n),
        # of the answerable cases, the share whose top result is right and claims support
        "correct_supported_rate": _rate(
            sum(o.semantic_support and o.top_entry in o.expected_ids for o in answerable), len(answerable)
        ),
        # of the unanswerable cases, the share returned without semantic support
        "unanswerable_unsupported_rate": _rate(sum(not o.semantic_support for o in unanswerable), len(unanswerable)),
        "filter_excluded_cases": [o.case_id for o in excluded],
    }


VERDICTS = ("helped", "hurt", "no change", "not applied")
HURT_MEANING = "the expected entry ranks lower with the L0 filter than without it (lower reciprocal rank)"


def filter_verdict(applied: bool, rr_unfiltered: float, rr_filtered: float) -> str:
    """The one definition of what the L0 filter did to a case: helped / hurt (reciprocal rank up / down with
    the filter than without it), no change, or not applied."""
    if not applied:
        return "not applied"
    if rr_filtered > rr_unfiltered:
        return "helped"
    if rr_filtered < rr_unfiltered:
        return "hurt"
    return "no change"


def filter_effect(cases: Iterable[tuple[str, bool, float, float]]) -> dict[str, Any]:
    """Per (case id, filter applied, RR without, RR with the filter): how many the filter helped, hurt, left
    alone or did not apply to, and which it hurt and helped."""
    counts = {v: 0 for v in VERDICTS}
    hurt: list[str] = []
    helped: list[str] = []
    for case_id, applied, rr_u, rr_f in cases:
        verdict = filter_verdict(applied, rr_u, rr_f)
        counts[verdict] += 1
        {"hurt": hurt, "helped": helped}.get(verdict, []).append(case_id)
    return {"definition": f"hurt: {HURT_MEANING}", "counts": counts, "hurt_cases": hurt, "helped_cases": helped}


def confusion(observations: Iterable[RoutingObservation]) -> dict[str, dict[str, int]]:
    """Expected domain -> L0-derived filter ('(none)' when unfiltered) -> count."""
    table: dict[str, dict[str, int]] = {}
    for o in observations:
        row = table.setdefault(o.expected_domain or "(none)", {})
        col = o.applied_category or "(none)"
        row[col] = row.get(col, 0) + 1
    return table


def _rate(num: int, den: int) -> float | None:
    return None if den == 0 else num / den
