"""What a wrong top result looks like in one knowledge base: the support estimate's baselines, fitted without labels.
A cosine strong in one knowledge base is what any sibling gets in another, so each signal is read against its value
with the right entry removed (retrieval.core.self_calibration), as a line over the log of the query's words.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.errors import ConfigError

NORM_FEATURES = ("similarity", "lexical_per_word")  # the raw features read against a baseline
MIN_PAIRS = 20  # probe pairs below which a knowledge base keeps the reference baselines


@dataclass(frozen=True)
class Baseline:
    """A feature's expected value for a query of `query_length` (log of its distinct words): intercept + slope × it."""

    intercept: float
    slope: float

    def at(self, query_length: float) -> float:
        return self.intercept + self.slope * query_length


@dataclass(frozen=True)
class SupportNorms:
    """The baselines of one knowledge base and model: per feature of NORM_FEATURES, its value at the top of a probe
    whose entry was removed. `kind`: "self" (fitted on this knowledge base's probes) or "reference" (the shared
    corpora's, for a knowledge base not calibrated yet)."""

    baselines: tuple[tuple[str, Baseline], ...]
    kind: str = "reference"
    probes: int = 0  # probe pairs fitted on
    fitted_on: str = ""  # for people: the knowledge base, model and settings

    def expected(self, feature: str) -> Baseline:
        for name, baseline in self.baselines:
            if name == feature:
                return baseline
        raise KeyError(feature)

    @property
    def fit_id(self) -> str:
        """A short digest of the baselines: which fit a lookup used (recorded with it)."""
        payload = json.dumps([[n, round(b.intercept, 6), round(b.slope, 6)] for n, b in self.baselines])
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.fit_id, "probes": self.probes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "probes": self.probes,
            "fitted_on": self.fitted_on,
            "baselines": {n: [b.intercept, b.slope] for n, b in self.baselines},
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "support fit") -> SupportNorms:
        """Read `to_dict`'s form back. Raises ConfigError naming `source` and the field that is wrong."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
        raw = data.get("baselines")
        if not isinstance(raw, dict) or set(raw) != set(NORM_FEATURES):
            raise ConfigError(f"{source}: 'baselines' must name exactly {', '.join(NORM_FEATURES)}")
        baselines = []
        for name in NORM_FEATURES:
            pair = raw[name]
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int | float) for v in pair)):
                raise ConfigError(f"{source}: baselines.{name} must be [intercept, slope], got {pair!r}")
            baselines.append((name, Baseline(float(pair[0]), float(pair[1]))))
        return cls(tuple(baselines), str(data.get("kind", "self")), int(data.get("probes", 0)), str(data.get("fitted_on", "")))


def fit_baseline(query_lengths: Sequence[float], values: Sequence[float]) -> Baseline:
    """The least-squares line of `values` over `query_lengths`; flat when the lengths do not vary."""
    x, y = np.asarray(query_lengths, dtype=float), np.asarray(values, dtype=float)
    if len(x) == 0:
        raise ValueError("a baseline needs at least one value")
    if np.ptp(x) < 1e-9:
        return Baseline(float(y.mean()), 0.0)
    slope, intercept = np.polyfit(x, y, 1)
    return Baseline(float(intercept), float(slope))


def fit_norms(rows: Sequence[tuple[float, dict[str, float]]], *, fitted_on: str = "") -> SupportNorms:
    """Baselines from the top results of probes whose entry was removed: each row (query_length, {feature: value})."""
    lengths = [length for length, _ in rows]
    return SupportNorms(
        tuple((f, fit_baseline(lengths, [values[f] for _, values in rows])) for f in NORM_FEATURES),
        kind="self",
        probes=len(rows),
        fitted_on=fitted_on,
    )
