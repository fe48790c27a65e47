"""Choosing settings without fooling ourselves: the sweep grid, k-fold cross-validation, a paired test.
Settings are chosen on the training folds (macro mean over the sets) and scored on the held-out fold; folds are
stratified by set and repeated with different shuffles.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from retrieval.config import EVAL_SETTINGS, Settings
from retrieval.errors import ConfigError, LookupLabError
from retrieval.types.models import MODELS, spec_of
from retrieval.types.modes import LookupMode, MissingScore, values

# Settings a sweep can vary: the retrieval-quality settings an eval run reports (config.EVAL_SETTINGS), each with
# the type of its field, without None. A sweep re-ranks signals fetched once (lab/sweep.py), so a setting that
# joins them must be applied there too (tests/evals/test_tuning.py names the ones it is).
_GRID_TYPES = {"int": int, "float": float, "str": str, "LookupMode": str, "MissingScore": str}  # an enum's value is text
_FIELD_TYPES = {f.name: str(f.type).removesuffix(" | None") for f in fields(Settings)}
SWEEPABLE: dict[str, type] = {name: _GRID_TYPES[_FIELD_TYPES[name]] for name in EVAL_SETTINGS}
ALIASES = {
    "mode": "search_mode",
    "alpha": "hybrid_alpha",
    "support": "support_threshold",
    "model": "embedding_model",
    "depth": "candidate_depth",
    "missing": "missing_score",
}
CHOICES: dict[str, tuple[str, ...]] = {"search_mode": values(LookupMode), "missing_score": values(MissingScore)}
MAX_POINTS = 2000
GRID_EXAMPLE = "search_mode=fusion,hybrid;l0_weight=0,0.1,0.2"
ALPHA = 0.05


@dataclass(frozen=True)
class Grid:
    """Axes (setting, values) in the order given; the points are every combination."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.axes)

    def points(self) -> list[dict[str, Any]]:
        return [dict(zip(self.names, combo, strict=True)) for combo in itertools.product(*(values for _, values in self.axes))]

    def to_dict(self) -> dict[str, list[Any]]:
        return {name: list(values) for name, values in self.axes}


def _value(name: str, raw: str, base: Settings) -> Any:
    kind = SWEEPABLE[name]
    text = raw.strip()
    if kind is str and name == "embedding_model":
        if text.lower() not in {m.lower() for m in MODELS}:
            raise ConfigError(f"--grid: {name} '{text}' is not one of {', '.join(MODELS)}")
        value: Any = spec_of(text).name
    elif kind is str:
        choices = CHOICES.get(name, ())
        if text not in choices:
            raise ConfigError(f"--grid: {name} '{text}' is not one of {', '.join(choices)}")
        value = text
    else:
        try:
            value = int(text) if kind is int else float(text)
        except ValueError:
            what = "whole numbers" if kind is int else "numbers"
            raise ConfigError(f"--grid: {name} needs {what}, got '{text}'") from None
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"--grid: {name} needs finite numbers, got '{text}'")
    if name == "support_threshold" and not 0.0 <= value <= 1.0:
        raise ConfigError(f"--grid: {name} {value} is not between 0 and 1")
    try:
        base.with_(**{name: value})  # the settings' own checks: alpha in [0, 1], weights >= 0, top_k >= 1
    except ConfigError as exc:
        raise ConfigError(f"--grid: {exc}") from None
    return value


def parse_grid(text: str, base: Settings | None = None) -> Grid:
    """'search_mode=fusion,hybrid;l0_weight=0,0.1' -> a Grid. Raises ConfigError naming the setting or value."""
    base = base or Settings()
    axes: dict[str, tuple[Any, ...]] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        name, eq, raw_values = part.partition("=")
        name = ALIASES.get(name.strip(), name.strip())
        if not eq:
            raise ConfigError(f"--grid: '{part}' needs NAME=V1,V2,… (e.g. {GRID_EXAMPLE})")
        if name not in SWEEPABLE:
            raise ConfigError(f"--grid: '{name}' is not a setting a sweep can vary (these can: {', '.join(SWEEPABLE)})")
        if name in axes:
            raise ConfigError(f"--grid: {name} is given twice")
        values = tuple(_value(name, v, base) for v in raw_values.split(",") if v.strip())
        if not values:
            raise ConfigError(f"--grid: {name} has no values")
        if len(set(values)) < len(values):
            raise ConfigError(f"--grid: {name} lists a value twice ({raw_values.strip()})")
        axes[name] = values
    if not axes:
        raise ConfigError(f"--grid is empty: give e.g. '{GRID_EXAMPLE}'")
    grid = Grid(tuple(axes.items()))
    size = math.prod(len(v) for _, v in grid.axes)
    if size > MAX_POINTS:
        raise ConfigError(f"--grid has {size} points, over the limit of {MAX_POINTS}: use fewer values")
    return grid


# --- cross-validation -------------------------------------------------------------------------------------
def macro_mean(values: np.ndarray, groups: np.ndarray, rows: np.ndarray) -> float:
    """Mean over the groups (eval sets) present in `rows` of each group's mean: every set counts once."""
    picked, of = values[rows], groups[rows]
    return float(np.mean([picked[of == g].mean() for g in np.unique(of)]))


def stratified_folds(groups: np.ndarray, folds: int, rng: random.Random) -> np.ndarray:
    """A fold number per row: each group shuffled and dealt round the folds, so every fold has its share."""
    fold_of = np.zeros(len(groups), dtype=int)
    for g in np.unique(groups):
        rows = [int(r) for r in np.flatnonzero(groups == g)]
        rng.shuffle(rows)
        for j, r in enumerate(rows):
            fold_of[r] = j % folds
    return fold_of


@dataclass(frozen=True)
class CrossValidation:
    """Per repeat and fold: the point chosen on the training rows, its training and its held-out score."""

    folds: int
    repeats: int
    picks: tuple[int, ...]
    training: tuple[float, ...]
    held_out: tuple[float, ...]

    @property
    def cv_mean(self) -> float:
        return float(np.mean(self.held_out))

    @property
    def cv_sd(self) -> float:
        """Sample standard deviation of the held-out fold scores."""
        return float(np.std(self.held_out, ddof=1)) if len(self.held_out) > 1 else 0.0

    def chosen(self) -> list[tuple[int, int]]:
        """(point index, times chosen), most often first."""
        counts: dict[int, int] = {}
        for i in self.picks:
            counts[i] = counts.get(i, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "folds": self.folds,
            "repeats": self.repeats,
            "cv_mean": self.cv_mean,
            "cv_sd": self.cv_sd,
            "training_mean": float(np.mean(self.training)),
            "training_sd": float(np.std(self.training, ddof=1)) if len(self.training) > 1 else 0.0,
            "held_out": list(self.held_out),
        }


def check_cv(answerable: Mapping[str, int], folds: int, repeats: int) -> None:
    """Refuse folds and repeats that the answerable cases per eval set (sets with none are left out) cannot give."""
    if folds < 2:
        raise LookupLabError(f"--folds {folds}: cross-validation needs at least 2 folds")
    if repeats < 1:
        raise LookupLabError(f"--repeats {repeats}: needs at least 1")
    counts = {name: n for name, n in answerable.items() if n > 0}
    if not counts:
        raise LookupLabError("cross-validation needs answerable cases (with an expected entry); there are none")
    name, smallest = min(counts.items(), key=lambda kv: kv[1])
    if smallest < folds:
        raise LookupLabError(f"--folds {folds}: eval set {name} has only {smallest} answerable cases; use fewer folds")


def cross_validate(
    scores: np.ndarray,
    groups: Sequence[str] | np.ndarray,
    *,
    folds: int = 5,
    repeats: int = 5,
    seed: int = 7,
    splits: Sequence[np.ndarray] | None = None,
    tiebreak: Sequence[float] | None = None,
) -> CrossValidation:
    """`scores[p, i]`: point p's score on row i. Per split, the point with the best training macro mean (on a
    tie the higher `tiebreak[p]`, then the first in grid order) and its held-out macro mean. `splits` (a fold
    number per row, one array per repeat) replaces the shuffled folds, for hand-checked cases."""
    groups = np.asarray(groups)
    check_cv({str(g): int((groups == g).sum()) for g in np.unique(groups)}, folds, repeats)
    second = list(tiebreak) if tiebreak is not None else [0.0] * len(scores)
    rng = random.Random(seed)
    assignments = list(splits) if splits is not None else [stratified_folds(groups, folds, rng) for _ in range(repeats)]
    picks, training, held = [], [], []
    for fold_of in assignments:
        for f in range(folds):
            train, test = np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)
            if len(test) == 0:
                continue
            chosen = max(range(len(scores)), key=lambda p: (macro_mean(scores[p], groups, train), second[p]))
            picks.append(chosen)
            training.append(macro_mean(scores[chosen], groups, train))
            held.append(macro_mean(scores[chosen], groups, test))
    return CrossValidation(folds, len(assignments), tuple(picks), tuple(training), tuple(held))


@dataclass(frozen=True)
class PairedTest:
    """Paired t-test over cases of one metric, b against a (delta = mean of b - a)."""

    metric: str
    cases: int
    mean_a: float
    mean_b: float
    p_value: float | None
    effect_size: float | None  # Cohen's d of the paired differences (mean / sd)

    @property
    def delta(self) -> float:
        return self.mean_b - self.mean_a

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "test": "paired t-test over cases",
            "cases": self.cases,
            "current": self.mean_a,
            "best": self.mean_b,
            "delta": self.delta,
            "p_value": self.p_value,
            "effect_size": self.effect_size,
            "significant": self.significant,
            "alpha": ALPHA,
        }


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, metric: str = "mrr@10") -> PairedTest:
    """Identical scores give p = 1; equal non-zero differences on every case give p = 0."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(x)
    if n < 2:
        return PairedTest(metric, n, float(x.mean()) if n else math.nan, float(y.mean()) if n else math.nan, None, None)
    diff = y - x
    sd = float(np.std(diff, ddof=1))
    if sd == 0.0:
        p, effect = (1.0, 0.0) if diff[0] == 0 else (0.0, None)
    else:
        p, effect = float(stats.ttest_rel(y, x).pvalue), float(diff.mean() / sd)
    return PairedTest(metric, n, float(x.mean()), float(y.mean()), p, effect)
