"""Settings sweeps: every grid point on every case of one or more eval sets, chosen by cross-validation. Each case asks
Weaviate once per distinct query setting; each point re-ranks those candidates with the lookup's own `fuse` and
`assess`, so its figures are `run_eval`'s `lookup` configuration's at the same settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import rank_and_assess
from retrieval.errors import LookupLabError
from retrieval.evals.catalog import EvalSetFile, same_path
from retrieval.evals.configs import DEPTH
from retrieval.evals.set_folds import CHOOSE_RULES, CaseTable, CvMethod, SetCrossValidation, below_on, check_set_cv, hold_out
from retrieval.evals.set_folds import choose as pick
from retrieval.evals.sets import EvalSet, corpus_fit, load_eval_set
from retrieval.evals.tuning import SWEEPABLE, CrossValidation, Grid, check_cv, cross_validate, macro_mean, paired_test
from retrieval.lab.sweep_signals import (
    CaseSignals,
    Progress,
    QueryKey,
    collect_signals,
    eval_pipeline,
    keys_for,
    point_settings,
    query_keys,
)
from retrieval.types.modes import L1Status

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
    case at these settings, as lookup_knowledge would rank and assess it (the runner's rank_and_assess)."""
    pipeline = eval_pipeline(settings)
    found = tuple(s.found[k] for k in query_keys(settings))
    status = L1Status.OK if any(found) else L1Status.EMPTY
    k = max(DEPTH, settings.top_k)
    ranking, relevance = rank_and_assess(s.l0, found, pipeline, settings.options(), s.query, status, k=k, norms=s.norms)
    ids = [r.entry_id for r in ranking]
    place = next((i for i, e in enumerate(ids[:DEPTH], 1) if e in s.relevant), None)
    recall = len(s.relevant & set(ids[:5])) / len(s.relevant) if s.relevant else 0.0
    top_right = bool(ids) and ids[0] in s.relevant
    return (0.0 if place is None else 1.0 / place), float(place == 1), recall, relevance.semantic_support, top_right


@dataclass(frozen=True)
class PointResult:
    """One grid point (or the current settings): the swept values, macro metrics over the sets, mrr@10 per set, and
    the answerable sets on which it is below the current settings."""

    settings: dict[str, Any]
    metrics: dict[str, float | None]
    per_set: dict[str, float]
    below_current: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, **self.metrics, "per_set": self.per_set, "below_current": list(self.below_current)}


def _macro(values: np.ndarray, sets: np.ndarray, mask: np.ndarray) -> float | None:
    rows = np.flatnonzero(mask)
    return macro_mean(values, sets, rows) if len(rows) else None


def _figures(signals: Sequence[CaseSignals], settings: Settings) -> np.ndarray:
    """(cases x 5): rr, hit@1, recall@5, supported, top right (case_figures) of every case at these settings."""
    return np.array([case_figures(s, settings) for s in signals], dtype=float).reshape(len(signals), 5)


def _point(figures: np.ndarray, sets: np.ndarray, answerable: np.ndarray, shown: dict[str, Any]) -> PointResult:
    rr, hit1, recall5, supported, right = figures.T
    metrics = {
        "mrr@10": _macro(rr, sets, answerable),
        "hit@1": _macro(hit1, sets, answerable),
        "recall@5": _macro(recall5, sets, answerable),
        "correct_supported_rate": _macro(supported * right, sets, answerable),
        "unanswerable_unsupported_rate": _macro(1.0 - supported, sets, ~answerable),
    }
    per_set = {str(g): float(rr[answerable & (sets == g)].mean()) for g in np.unique(sets[answerable])}
    return PointResult(shown, metrics, per_set)


@dataclass(frozen=True)
class Validation:
    """How the choice was checked: `method` "sets" (leave one set out, and one corpus out when the sets span two
    corpora) or "kfold" (stratified by set, repeated); the rule a fold chooses by (mean or worst set)."""

    method: str
    rule: str
    by_set: SetCrossValidation | None = None
    by_corpus: SetCrossValidation | None = None
    kfold: CrossValidation | None = None

    @property
    def label(self) -> str:
        if self.method == CvMethod.KFOLD and self.kfold is not None:
            return (
                f"stratified {self.kfold.repeats}×{self.kfold.folds}-fold (every training fold holds every set: it measures "
                "new queries of the styles seen, not a new style)"
            )
        return "leave one set out" + (", leave one corpus out" if self.by_corpus is not None else "")

    def to_dict(self, points: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {
            "method": self.method,
            "label": self.label,
            "choose": self.rule,
            "leave_one_set_out": None if self.by_set is None else self.by_set.to_dict(points),
            "leave_one_corpus_out": None if self.by_corpus is None else self.by_corpus.to_dict(points),
            "kfold": None if self.kfold is None else self.kfold.to_dict(),
        }


@dataclass(frozen=True)
class BestPoint:
    """The point chosen on every set (by the validation's rule), how that choice held on what it was not chosen on,
    and the paired test of its reciprocal ranks against the current settings' on the answerable cases."""

    index: int
    point: PointResult
    validation: Validation
    chosen: tuple[tuple[dict[str, Any], int], ...]  # the points the folds chose, most often first
    vs_current: dict[str, Any]

    @property
    def cv(self) -> CrossValidation | None:
        """The stratified k-fold estimate, when the validation was k-fold."""
        return self.validation.kfold

    @property
    def held_out_mean(self) -> float | None:
        """Mean held-out mrr@10: over the sets left out one at a time, or over the k folds."""
        v = self.validation
        if v.by_set is not None:
            return v.by_set.mean
        return None if v.kfold is None else v.kfold.cv_mean

    def to_dict(self) -> dict[str, Any]:
        kfold = self.validation.kfold
        return {
            "settings": self.point.settings,
            "held_out_mean": self.held_out_mean,
            "cv_mean": None if kfold is None else kfold.cv_mean,
            "cv_sd": None if kfold is None else kfold.cv_sd,
            "in_sample": self.point.metrics["mrr@10"],
            "metrics": self.point.metrics,
            "below_current": list(self.point.below_current),
            "p_value": self.vs_current["p_value"],
            "vs_current": self.vs_current,
            "cv": None if kfold is None else kfold.to_dict(),
            "chosen": [{"settings": s, "times": n} for s, n in self.chosen],
        }


@dataclass(frozen=True)
class SweepResult:
    grid: Grid
    sets: dict[str, dict[str, Any]]
    fixed: dict[str, Any]  # the sweepable settings the grid does not vary, at their current values
    points: tuple[PointResult, ...]
    best: BestPoint
    current: PointResult
    queries: int  # distinct Weaviate query settings asked per case

    @property
    def validation(self) -> Validation:
        return self.best.validation

    def to_dict(self) -> dict[str, Any]:
        shown = [p.settings for p in self.points]
        return {
            "grid": self.grid.to_dict(),
            "sets": self.sets,
            "fixed": self.fixed,
            "queries_per_case": self.queries,
            "points": [p.to_dict() for p in self.points],
            "best": self.best.to_dict(),
            "current": self.current.to_dict(),
            "validation": self.validation.to_dict(shown),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per point: the swept settings, then the metrics (for tables and charts)."""
        return [{**p.settings, **p.metrics, "below current on": ", ".join(p.below_current)} for p in self.points]


def default_cv(signals: Sequence[CaseSignals]) -> str:
    """Leave-one-set-out when two or more sets have answerable cases, else the stratified k-fold."""
    return "sets" if len({s.set_name for s in signals if s.relevant}) >= 2 else "kfold"


def run_sweep(
    signals: Sequence[CaseSignals],
    grid: Grid,
    current: Settings,
    *,
    cv: str | None = None,
    choose: str = "mean",
    folds: int = 5,
    repeats: int = 5,
    seed: int = 7,
    progress: Progress | None = None,
) -> SweepResult:
    """Score every point on the collected signals, choose the best by `choose` (the mean of the sets' mrr@10, or the
    worst set's), check that choice by `cv` ("sets": leave one set out, and one corpus out when there are two;
    "kfold": stratified k-fold; default: default_cv), and compare the best with the current settings."""
    method = cv or default_cv(signals)
    if method not in ("sets", "kfold"):
        raise LookupLabError(f"--cv {method!r}: one of sets, kfold")
    if choose not in CHOOSE_RULES:
        raise LookupLabError(f"--choose {choose!r}: one of {', '.join(CHOOSE_RULES)}")
    answerable = np.array([bool(s.relevant) for s in signals])
    sets = np.array([s.set_name for s in signals])
    corpora = np.array([s.corpus for s in signals])
    if method == CvMethod.SETS:
        check_set_cv(sorted(set(sets[answerable])), [], "sets")
    todo = grid.points()
    figures = []
    for i, p in enumerate(todo):
        figures.append(_figures(signals, point_settings(current, p)))
        if progress:
            progress("grid points", i + 1, len(todo))
    now_figures = _figures(signals, current)
    stack = np.stack([*figures, now_figures])  # points (and the current settings last) x cases x 5
    table = CaseTable(stack[..., 0], stack[..., 1], stack[..., 3], stack[..., 4], sets, corpora, answerable)
    now_index = len(todo)
    # a tie goes to the point that changes the fewest current settings (a setting that does not matter is left as it
    # is, and the support thresholds, which do not move mrr@10, stay unless the sweep changes nothing else)
    closeness = [-sum(v != getattr(current, k) for k, v in p.items()) for p in todo]
    names, per_set = table.set_mrr()
    best = pick(per_set, range(len(names)), closeness, choose)
    points = tuple(
        replace(_point(f, sets, answerable, dict(p)), below_current=tuple(below_on(table, i, now_index)))
        for i, (f, p) in enumerate(zip(figures, todo, strict=True))
    )
    now = _point(now_figures, sets, answerable, {name: getattr(current, name) for name in grid.names})
    if method == CvMethod.SETS:
        by_set = hold_out(table, "sets", tiebreak=closeness, rule=choose, current=now_index)
        two_corpora = len(set(corpora[answerable])) >= 2
        by_corpus = hold_out(table, "corpora", tiebreak=closeness, rule=choose, current=now_index) if two_corpora else None
        validation = Validation("sets", choose, by_set, by_corpus)
        picks = [r.chosen for r in {r.fold: r for r in by_set.rows}.values()]
    else:
        matrix = table.rr[:now_index][:, answerable]
        kfold = cross_validate(matrix, sets[answerable], folds=folds, repeats=repeats, seed=seed, tiebreak=closeness)
        validation = Validation("kfold", choose, kfold=kfold)
        picks = list(kfold.picks)
    counts: dict[int, int] = {}
    for i in picks:
        counts[i] = counts.get(i, 0) + 1
    chosen = tuple((points[i].settings, n) for i, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    test = paired_test(table.rr[now_index][answerable], table.rr[best][answerable]).to_dict()
    return SweepResult(
        grid=grid,
        sets={
            str(g): {
                "cases": int((sets == g).sum()),
                "answerable": int((answerable & (sets == g)).sum()),
                "corpus": str(corpora[sets == g][0]),
            }
            for g in np.unique(sets)
        },
        fixed={name: getattr(current, name) for name in SWEEPABLE if name not in grid.names},
        points=points,
        best=BestPoint(best, points[best], validation, chosen, test),
        current=now,
        queries=len(keys_for(grid, current)),
    )


def cv_for(eval_sets: Sequence[EvalSet], cv: str | None) -> str:
    """The validation a sweep of these sets runs: `cv`, else leave-one-set-out for two or more answerable sets."""
    if cv is not None:
        return cv
    return "sets" if sum(any(c.answerable for c in e.cases) for e in eval_sets) >= 2 else "kfold"


def check_folds(eval_sets: Sequence[EvalSet], folds: int, repeats: int, cv: str | None = None) -> None:
    """Refuse, before any query, a validation the sets cannot give: folds and repeats for k-fold, two answerable
    sets for leave-one-set-out."""
    method = cv_for(eval_sets, cv)
    if method == CvMethod.KFOLD:
        check_cv({e.name: sum(c.answerable for c in e.cases) for e in eval_sets}, folds, repeats)
    elif method == CvMethod.SETS:
        check_set_cv([e.name for e in eval_sets if any(c.answerable for c in e.cases)], [], "sets")
    else:
        raise LookupLabError(f"--cv {method!r}: one of sets (leave one set out), kfold (stratified k-fold)")


def sweep_sets(
    eval_sets: Sequence[EvalSet],
    services: LookupServices,
    current: Settings,
    grid: Grid,
    *,
    cv: str | None = None,
    choose: str = "mean",
    folds: int = 5,
    repeats: int = 5,
    progress: Progress | None = None,
    other_models: Mapping[str, LookupServices] | None = None,
) -> SweepResult:
    """Sets on one loaded corpus (the app's case): collect the signals, then sweep. `other_models`: the services
    (embedder and collection) of each other embedding model the grid varies."""
    check_folds(eval_sets, folds, repeats, cv)
    keys = keys_for(grid, current)
    signals = [
        s for e in eval_sets for s in collect_signals(e, services, current, keys, progress=progress, other_models=other_models)
    ]
    return run_sweep(
        signals, grid, current, cv=cv_for(eval_sets, cv), choose=choose, folds=folds, repeats=repeats, progress=progress
    )


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
