"""Settings sweeps: every grid point on every case of one or more eval sets, chosen by cross-validation.

Each case is embedded once and asks Weaviate once per distinct query setting (search mode, hybrid alpha,
candidate depth) of the grid and the current settings; every grid point then re-ranks those candidates with
the lookup's own `fuse` and `assess`, so a point that changes only weights or support thresholds costs no
query. The figures are those of `run_eval`'s `lookup` configuration at the same settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.core.candidates import L1Status
from retrieval.core.lookup import LookupServices
from retrieval.core.pipeline import judge, rank
from retrieval.errors import LookupLabError
from retrieval.evals.catalog import EvalSetFile, same_path
from retrieval.evals.configs import DEPTH
from retrieval.evals.sets import EvalSet, corpus_fit, load_eval_set
from retrieval.evals.tuning import SWEEPABLE, CrossValidation, Grid, check_cv, cross_validate, macro_mean, paired_test
from retrieval.lab.sweep_signals import CaseSignals, Progress, QueryKey, collect_signals, keys_for, point_settings, query_keys

# The signals a sweep fetches are sweep_signals'; importers of this module find QueryKey, query_keys and keys_for here too.
__all__ = [
    "BestPoint",
    "PointResult",
    "QueryKey",
    "SweepResult",
    "case_figures",
    "check_folds",
    "fitting_eval_sets",
    "keys_for",
    "query_keys",
    "run_sweep",
    "sweep_sets",
]

METRIC_NAMES = ("mrr@10", "hit@1", "recall@5", "correct_supported_rate", "unanswerable_unsupported_rate")


def case_figures(s: CaseSignals, settings: Settings) -> tuple[float, float, float, bool, bool]:
    """(reciprocal rank in the top 10, hit@1, recall@5, semantic support claimed, top result right) of one
    case at these settings, as lookup_knowledge would rank and assess it."""
    keys = query_keys(settings)
    vector = s.found[keys[0]]
    lexical = s.found[keys[1]] if len(keys) > 1 else ()
    ranking = rank(s.l0, vector, lexical, settings, k=max(DEPTH, settings.top_k))
    relevance = judge(ranking, L1Status.OK if vector or lexical else L1Status.EMPTY, vector, lexical, s.query, settings)
    ids = [r.entry_id for r in ranking]
    place = next((i for i, e in enumerate(ids[:DEPTH], 1) if e in s.relevant), None)
    recall = len(s.relevant & set(ids[:5])) / len(s.relevant) if s.relevant else 0.0
    top_right = bool(ids) and ids[0] in s.relevant
    return (0.0 if place is None else 1.0 / place), float(place == 1), recall, relevance.semantic_support, top_right


@dataclass(frozen=True)
class PointResult:
    """One grid point (or the current settings): the swept values, macro metrics over the sets, mrr@10 per set."""

    settings: dict[str, Any]
    metrics: dict[str, float | None]
    per_set: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, **self.metrics, "per_set": self.per_set}


def _macro(values: np.ndarray, sets: np.ndarray, mask: np.ndarray) -> float | None:
    rows = np.flatnonzero(mask)
    return macro_mean(values, sets, rows) if len(rows) else None


def _score(signals: Sequence[CaseSignals], settings: Settings, shown: dict[str, Any]) -> tuple[PointResult, np.ndarray]:
    figures = np.array([case_figures(s, settings) for s in signals], dtype=float).reshape(len(signals), 5)
    sets = np.array([s.set_name for s in signals])
    answerable = np.array([bool(s.relevant) for s in signals])
    rr, hit1, recall5, supported, right = figures.T
    metrics = {
        "mrr@10": _macro(rr, sets, answerable),
        "hit@1": _macro(hit1, sets, answerable),
        "recall@5": _macro(recall5, sets, answerable),
        "correct_supported_rate": _macro(supported * right, sets, answerable),
        "unanswerable_unsupported_rate": _macro(1.0 - supported, sets, ~answerable),
    }
    per_set = {str(g): float(rr[answerable & (sets == g)].mean()) for g in np.unique(sets[answerable])}
    return PointResult(shown, metrics, per_set), rr


@dataclass(frozen=True)
class BestPoint:
    """The point with the best in-sample macro mrr@10, the cross-validated estimate of choosing that way,
    and the paired test of its reciprocal ranks against the current settings' on the answerable cases."""

    index: int
    point: PointResult
    cv: CrossValidation
    chosen: tuple[tuple[dict[str, Any], int], ...]
    vs_current: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.point.settings,
            "cv_mean": self.cv.cv_mean,
            "cv_sd": self.cv.cv_sd,
            "in_sample": self.point.metrics["mrr@10"],
            "metrics": self.point.metrics,
            "p_value": self.vs_current["p_value"],
            "vs_current": self.vs_current,
            "cv": self.cv.to_dict(),
            "chosen": [{"settings": s, "times": n} for s, n in self.chosen],
        }


@dataclass(frozen=True)
class SweepResult:
    grid: Grid
    sets: dict[str, dict[str, int]]
    fixed: dict[str, Any]  # the sweepable settings the grid does not vary, at their current values
    points: tuple[PointResult, ...]
    best: BestPoint
    current: PointResult
    queries: int  # distinct Weaviate query settings asked per case

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": self.grid.to_dict(),
            "sets": self.sets,
            "fixed": self.fixed,
            "queries_per_case": self.queries,
            "points": [p.to_dict() for p in self.points],
            "best": self.best.to_dict(),
            "current": self.current.to_dict(),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per point: the swept settings, then the metrics (for tables and charts)."""
        return [{**p.settings, **p.metrics} for p in self.points]


def run_sweep(
    signals: Sequence[CaseSignals],
    grid: Grid,
    current: Settings,
    *,
    folds: int = 5,
    repeats: int = 5,
    seed: int = 7,
    progress: Progress | None = None,
) -> SweepResult:
    """Score every point on the collected signals, cross-validate the choice, compare with the current settings."""
    points, scores, todo = [], [], grid.points()
    for i, p in enumerate(todo):
        result, rr = _score(signals, point_settings(current, p), dict(p))
        points.append(result)
        scores.append(rr)
        if progress:
            progress("grid points", i + 1, len(todo))
    now, now_rr = _score(signals, current, {name: getattr(current, name) for name in grid.names})
    answerable = np.array([bool(s.relevant) for s in signals])
    sets = np.array([s.set_name for s in signals])
    # a tie goes to the point that changes the fewest current settings (a setting that does not matter is left as it
    # is, and the support thresholds, which do not move mrr@10, stay unless the sweep changes nothing else)
    closeness = [-sum(v != getattr(current, k) for k, v in p.settings.items()) for p in points]
    matrix = np.vstack(scores)[:, answerable]
    cv = cross_validate(matrix, sets[answerable], folds=folds, repeats=repeats, seed=seed, tiebreak=closeness)
    best = max(range(len(points)), key=lambda i: (points[i].metrics["mrr@10"] or 0.0, closeness[i]))
    test = paired_test(now_rr[answerable], scores[best][answerable]).to_dict()
    chosen = tuple((points[i].settings, n) for i, n in cv.chosen())
    return SweepResult(
        grid=grid,
        sets={
            str(g): {"cases": int((sets == g).sum()), "answerable": int((answerable & (sets == g)).sum())}
            for g in np.unique(sets)
        },
        fixed={name: getattr(current, name) for name in SWEEPABLE if name not in grid.names},
        points=tuple(points),
        best=BestPoint(best, points[best], cv, chosen, test),
        current=now,
        queries=len(keys_for(grid, current)),
    )


def check_folds(eval_sets: Sequence[EvalSet], folds: int, repeats: int) -> None:
    """Refuse, before any query, folds and repeats the sets cannot give."""
    check_cv({e.name: sum(c.answerable for c in e.cases) for e in eval_sets}, folds, repeats)


def sweep_sets(
    eval_sets: Sequence[EvalSet],
    services: LookupServices,
    current: Settings,
    grid: Grid,
    *,
    folds: int = 5,
    repeats: int = 5,
    progress: Progress | None = None,
    other_models: Mapping[str, LookupServices] | None = None,
) -> SweepResult:
    """Sets on one loaded corpus (the app's case): collect the signals, then sweep. `other_models`: the services
    (embedder and collection) of each other embedding model the grid varies."""
    check_folds(eval_sets, folds, repeats)
    keys = keys_for(grid, current)
    signals = [
        s for e in eval_sets for s in collect_signals(e, services, current, keys, progress=progress, other_models=other_models)
    ]
    return run_sweep(signals, grid, current, folds=folds, repeats=repeats, progress=progress)


def fitting_eval_sets(files: Sequence[EvalSetFile], known_ids: Sequence[str], corpus_dir: Path | str) -> list[EvalSetFile]:
    """The eval set files a sweep can run on the loaded corpus: every entry they expect is in it, and they
    have a case with a right answer or were written for this corpus."""
    out = []
    for f in files:
        try:
            eval_set = load_eval_set(f.path)
        except LookupLabError:
            continue
        answerable = any(c.answerable for c in eval_set.cases)
        if corpus_fit(eval_set, known_ids).fits and (answerable or same_path(eval_set.corpus_dir, corpus_dir)):
            out.append(f)
    return out
