"""A label-free estimate of the quality recorded traffic gets: estimated hit@1 is the mean support estimate over the calls
that carry one (each is the estimated chance that the call's top result is right), with the share of calls answered
without semantic support and the fallback rate; overall, per day (a drop marked), per session tag and per domain."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.reading import SupportSums, TrafficSums, Window, traffic_sums

Z = 1.96  # a 95% normal interval
PREVIOUS_DAYS = 7  # a day is compared with the pooled days before it, up to this many
INTERVAL = (
    "95% normal interval on the mean support: variance sum p(1-p)/n^2 (each call's hit a Bernoulli of its estimated "
    "chance) plus s^2/n (the sampling variance of the mean); it assumes the calibration holds and omits its error"
)
ESTIMATE = "estimated hit@1 = mean support estimate over the calls with one (label-free: an estimate, not a measurement)"


def interval_of(n: int, total: float, squares: float, chance_var: float) -> tuple[float, float, float] | None:
    """(mean, low, high) of n support estimates from their sum, sum of squares and sum of p(1-p); None when n is 0."""
    if n <= 0:
        return None
    mean = total / n
    sample_var = max(0.0, (squares - n * mean * mean) / (n - 1)) if n > 1 else 0.0
    half = Z * math.sqrt(max(0.0, chance_var) / n**2 + sample_var / n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


@dataclass(frozen=True)
class Estimate:
    """The estimate for one group of calls (`key`: a day, session tag or domain; "" for the whole window)."""

    key: str
    calls: int
    estimated_calls: int  # calls that carry a support estimate
    hit_at_1: float | None  # the estimate; None when no call carries one
    low: float | None
    high: float | None
    unsupported_share: float  # calls answered without semantic support (no estimate counts as none)
    fallback_rate: float
    calibration: tuple[str, ...]  # the support fits the estimates read ("self:<id>", "reference:<id>")
    drop: bool = False  # a day below the previous days' interval, its own interval below their estimate

    @property
    def no_estimate(self) -> int:
        return self.calls - self.estimated_calls

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "calls": self.calls,
            "estimated_calls": self.estimated_calls,
            "calls_without_estimate": self.no_estimate,
            "estimated_hit_at_1": _round(self.hit_at_1),
            "interval": None if self.low is None else [_round(self.low), _round(self.high)],
            "unsupported_share": _round(self.unsupported_share),
            "fallback_rate": _round(self.fallback_rate),
            "calibration": list(self.calibration),
            "drop": self.drop,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def estimate_of(sums: SupportSums) -> Estimate:
    """The estimate of one group's sums."""
    figures = interval_of(sums.estimated, sums.support_sum, sums.support_sq_sum, sums.chance_var_sum)
    mean, low, high = figures if figures is not None else (None, None, None)
    calls = max(sums.calls, 1)
    return Estimate(
        sums.key, sums.calls, sums.estimated, mean, low, high, sums.unsupported / calls, sums.fallbacks / calls, sums.fits
    )


def _pooled(days: list[SupportSums]) -> SupportSums:
    return SupportSums(
        "",
        sum(d.calls for d in days),
        sum(d.estimated for d in days),
        sum(d.support_sum for d in days),
        sum(d.support_sq_sum for d in days),
        sum(d.chance_var_sum for d in days),
        sum(d.unsupported for d in days),
        sum(d.fallbacks for d in days),
        (),
    )


def with_drops(days: tuple[SupportSums, ...]) -> tuple[Estimate, ...]:
    """Each day's estimate, marked as a drop when it falls below the interval of the pooled previous days (up to
    PREVIOUS_DAYS) and its own interval lies below their estimate: a fall beyond both intervals."""
    out = []
    for i, day in enumerate(days):
        own = estimate_of(day)
        before = estimate_of(_pooled(list(days[max(0, i - PREVIOUS_DAYS) : i]))) if i else None
        if (
            before is not None
            and before.hit_at_1 is not None
            and own.hit_at_1 is not None
            and before.low is not None
            and own.high is not None
        ):
            own = replace(own, drop=own.hit_at_1 < before.low and own.high < before.hit_at_1)
        out.append(own)
    return tuple(out)


@dataclass(frozen=True)
class TrafficEstimate:
    """The label-free estimate over a window of recorded calls, overall and broken down."""

    window: str
    overall: Estimate
    per_day: tuple[Estimate, ...]  # oldest first, keys ISO dates (UTC)
    per_tag: tuple[Estimate, ...]
    per_domain: tuple[Estimate, ...]  # by the top result's domain, most calls first

    @property
    def calibration(self) -> tuple[str, ...]:
        return self.overall.calibration

    @property
    def drops(self) -> tuple[str, ...]:
        return tuple(d.key for d in self.per_day if d.drop)

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": ESTIMATE,
            "interval": INTERVAL,
            "window": self.window,
            "calibration": list(self.calibration),
            "calibration_words": calibration_words(self.calibration),
            "overall": self.overall.to_dict(),
            "per_day": [d.to_dict() for d in self.per_day],
            "per_session_tag": [d.to_dict() for d in self.per_tag],
            "per_domain": [d.to_dict() for d in self.per_domain],
            "drops": list(self.drops),
        }


def estimate_from_sums(sums: TrafficSums, window: str) -> TrafficEstimate:
    return TrafficEstimate(
        window,
        estimate_of(sums.overall),
        with_drops(sums.per_day),
        tuple(estimate_of(s) for s in sums.per_tag),
        tuple(estimate_of(s) for s in sums.per_domain),
    )


def traffic_estimate(store: InvocationStore, flt: InvocationFilter, collection: str | None = None) -> TrafficEstimate:
    """The estimate over the window's calls. Raises TrafficError for no calls, an unknown tag or an empty window."""
    return estimate_from_sums(traffic_sums(store, flt, collection), Window(flt, collection).describe())


def calibration_words(fits: tuple[str, ...]) -> str:
    """Which calibration the estimates read, as people read it."""
    if not fits:
        return "no support fit recorded (no call carries an estimate)"
    words = []
    for fit in fits:
        kind, _, fit_id = fit.partition(":")
        where = "this knowledge base's own baselines" if kind == "self" else f"the {kind} baselines"
        words.append(f"{where} (fit {fit_id or '?'})")
    mixed = " — several fits: calls from before and after a new fit are mixed" if len(fits) > 1 else ""
    return "support read against " + "; ".join(words) + mixed
