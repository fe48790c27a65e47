"""Whether the support estimate means what it says: predicted against observed, bin by bin (a reliability diagram),
the expected calibration error, and the predicted hit@1 (the mean estimate) beside the measured one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BINS = 10


@dataclass(frozen=True)
class ReliabilityBin:
    """Cases whose estimate fell in [low, high): how many, their mean estimate, and the share whose top was right."""

    low: float
    high: float
    count: int
    predicted: float
    observed: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "count": self.count,
            "predicted": round(self.predicted, 4),
            "observed": round(self.observed, 4),
        }


@dataclass(frozen=True)
class Reliability:
    """The estimate against the outcome over a set of cases. `ece`: the expected calibration error (each bin's
    |predicted - observed| weighted by its share of the cases); `predicted_hit1` and `hit1`: the mean estimate and
    the share of right top results."""

    bins: tuple[ReliabilityBin, ...]
    cases: int
    ece: float
    predicted_hit1: float
    hit1: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "ece": round(self.ece, 4),
            "predicted_hit1": round(self.predicted_hit1, 4),
            "hit1": round(self.hit1, 4),
            "gap": round(self.predicted_hit1 - self.hit1, 4),
            "bins": [b.to_dict() for b in self.bins],
        }


def reliability(estimates: Sequence[float], right: Sequence[bool], *, bins: int = BINS) -> Reliability | None:
    """The reliability of `estimates` (each in [0, 1]) against whether each top result was right; None without cases.
    Bins are equal-width; the last one holds 1.0."""
    if len(estimates) != len(right):
        raise ValueError(f"{len(estimates)} estimates for {len(right)} outcomes")
    if not estimates:
        return None
    rows: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for p, ok in zip(estimates, right, strict=True):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"an estimate must be between 0 and 1, got {p}")
        rows[min(int(p * bins), bins - 1)].append((p, bool(ok)))
    made = []
    ece = 0.0
    for i, row in enumerate(rows):
        if not row:
            continue
        predicted = sum(p for p, _ in row) / len(row)
        observed = sum(ok for _, ok in row) / len(row)
        ece += len(row) / len(estimates) * abs(predicted - observed)
        made.append(ReliabilityBin(i / bins, (i + 1) / bins, len(row), predicted, observed))
    return Reliability(tuple(made), len(estimates), ece, sum(estimates) / len(estimates), sum(map(bool, right)) / len(right))
