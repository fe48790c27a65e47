"""Cross-validation that holds out whole eval sets or whole corpora: what a setting chosen on some styles of query (or
corpora) does on one it was not chosen on. Stratified k-fold (`tuning.cross_validate`) mixes every set into every
training fold, so it measures new queries of seen styles; these folds measure a new style.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from retrieval.errors import LookupLabError
from retrieval.types.modes import values


class CvMethod(StrEnum):
    """How a choice of settings is checked: leave one set out, leave one corpus out, or stratified k-fold."""

    SETS = "sets"
    CORPORA = "corpora"
    KFOLD = "kfold"


class ChooseRule(StrEnum):
    """How a fold ranks the points on its training sets: by the mean of their mrr@10, or by the worst set's."""

    MEAN = "mean"
    WORST = "worst"


CHOOSE_RULES = values(ChooseRule)
SET_CV_KINDS = (CvMethod.SETS.value, CvMethod.CORPORA.value)  # the folds that hold out whole sets
# A point is below another on a set when its mrr@10 there is lower by more than this (rounding, not a case).
LOSES_BY = 0.001


@dataclass(frozen=True)
class CaseTable:
    """Every point's figures per case (rows: points, columns: cases) and what each case belongs to."""

    rr: np.ndarray  # reciprocal rank of the first right entry in the top 10 (0 for an unanswerable case)
    hit1: np.ndarray  # the right entry first (0 for an unanswerable case)
    supported: np.ndarray  # the support claim made
    right: np.ndarray  # the top result is right (0 for an unanswerable case)
    sets: np.ndarray  # the eval set of each case
    corpora: np.ndarray  # the corpus (folder name) of each case's set
    answerable: np.ndarray  # bool per case

    @property
    def set_names(self) -> list[str]:
        return sorted({str(s) for s in self.sets})

    def corpus_of(self, set_name: str) -> str:
        return str(self.corpora[np.flatnonzero(self.sets == set_name)[0]])

    def is_answerable(self, set_name: str) -> bool:
        return bool(self.answerable[self.sets == set_name].any())

    def set_mrr(self) -> tuple[list[str], np.ndarray]:
        """(answerable set names, mrr@10 per point and set: points x sets)."""
        names = [n for n in self.set_names if self.is_answerable(n)]
        cols = [self.rr[:, (self.sets == n) & self.answerable].mean(axis=1) for n in names]
        return names, np.column_stack(cols) if cols else np.zeros((len(self.rr), 0))

    def figures(self, point: int, set_name: str) -> dict[str, float | None]:
        """mrr@10, hit@1 and the support promise of one set at one point. The promise: on an answerable set the right
        top results that get the claim (correct_supported / hit@1), on an unanswerable one the queries left without it."""
        cols = self.sets == set_name
        if self.is_answerable(set_name):
            cols &= self.answerable
            right = self.right[point, cols].astype(bool)
            supported = self.supported[point, cols].astype(bool)
            return {
                "mrr@10": float(self.rr[point, cols].mean()),
                "hit@1": float(self.hit1[point, cols].mean()),
                "correct_supported_rate": float((right & supported).mean()),
                "promise": float((right & supported).sum() / right.sum()) if right.any() else None,
            }
        return {
            "mrr@10": None,
            "hit@1": None,
            "correct_supported_rate": None,
            "promise": float(1.0 - self.supported[point, cols].mean()),
        }


def choose(per_set: np.ndarray, columns: Sequence[int], tiebreak: Sequence[float], rule: str) -> int:
    """The point with the best mean (or worst) mrr@10 over the sets `columns` of `per_set` (points x sets); on a tie
    the higher `tiebreak`, then the first in grid order. Only the first len(tiebreak) rows are points to choose from
    (a row after them holds the current settings, for reference)."""
    if rule not in CHOOSE_RULES:
        raise LookupLabError(f"--choose {rule!r}: one of {', '.join(CHOOSE_RULES)}")
    cols = per_set[:, list(columns)]
    value = cols.mean(axis=1) if rule == ChooseRule.MEAN else cols.min(axis=1)
    return max(range(len(tiebreak)), key=lambda p: (round(float(value[p]), 12), tiebreak[p], -p))


@dataclass(frozen=True)
class HeldOutRow:
    """One set scored in one fold: the point chosen on the fold's training sets, that point's figures on this set,
    and the figures of the point chosen on every set (in-sample), with the gap between the two mrr@10s."""

    fold: str  # what the fold held out: a set's name, or a corpus's
    set_name: str
    corpus: str
    answerable: bool
    trained_on: tuple[str, ...]
    chosen: int
    held_out: dict[str, float | None]
    in_sample: dict[str, float | None]
    current: dict[str, float | None]  # the current settings' figures on this set, for the "loses" mark

    @property
    def gap(self) -> float | None:
        """In-sample mrr@10 minus held-out mrr@10 (positive: the set does worse when it had no say in the choice)."""
        a, b = self.in_sample["mrr@10"], self.held_out["mrr@10"]
        return None if a is None or b is None else a - b

    @property
    def loses(self) -> bool:
        """The choice made without this set is below the current settings on it."""
        a, b = self.held_out["mrr@10"], self.current["mrr@10"]
        return a is not None and b is not None and a < b - LOSES_BY

    def to_dict(self, points: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {
            "fold": self.fold,
            "set": self.set_name,
            "corpus": self.corpus,
            "answerable": self.answerable,
            "trained_on": list(self.trained_on),
            "chosen": self.chosen if points is None else points[self.chosen],
            "held_out": self.held_out,
            "in_sample": self.in_sample,
            "current": self.current,
            "gap": self.gap,
            "loses_to_current": self.loses,
        }


@dataclass(frozen=True)
class SetCrossValidation:
    """Leave-one-set-out ("sets") or leave-one-corpus-out ("corpora"): one row per set scored."""

    kind: str
    rule: str
    in_sample_point: int
    rows: tuple[HeldOutRow, ...]

    @property
    def label(self) -> str:
        return "leave one set out" if self.kind == CvMethod.SETS else "leave one corpus out"

    def _answerable(self) -> list[float]:
        return [r.held_out["mrr@10"] for r in self.rows if r.held_out["mrr@10"] is not None]

    @property
    def mean(self) -> float | None:
        """Mean held-out mrr@10 over the answerable sets."""
        values = self._answerable()
        return float(np.mean(values)) if values else None

    @property
    def worst(self) -> HeldOutRow | None:
        """The answerable set with the lowest held-out mrr@10."""
        rows = [r for r in self.rows if r.held_out["mrr@10"] is not None]
        return min(rows, key=lambda r: r.held_out["mrr@10"] or 0.0) if rows else None

    @property
    def largest_gap(self) -> float | None:
        gaps = [g for r in self.rows if (g := r.gap) is not None]
        return max(gaps) if gaps else None

    def to_dict(self, points: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        worst = self.worst
        return {
            "kind": self.kind,
            "label": self.label,
            "choose": self.rule,
            "mean_mrr@10": self.mean,
            "worst_set": None if worst is None else worst.set_name,
            "worst_mrr@10": None if worst is None else worst.held_out["mrr@10"],
            "largest_gap": self.largest_gap,
            "rows": [r.to_dict(points) for r in self.rows],
        }


def folds_of(table: CaseTable, kind: str) -> list[tuple[str, list[str], list[str]]]:
    """(fold name, training sets, scored sets) per fold: every set held out alone ("sets"), or every corpus's sets
    together ("corpora"). Training sets are the answerable ones not held out; a fold without any is left out."""
    names = table.set_names
    answerable = [n for n in names if table.is_answerable(n)]
    if kind == CvMethod.SETS:
        groups = [(n, [n]) for n in names]
    elif kind == CvMethod.CORPORA:
        corpora = sorted({table.corpus_of(n) for n in names})
        groups = [(c, [n for n in names if table.corpus_of(n) == c]) for c in corpora]
    else:
        raise LookupLabError(f"unknown set cross-validation {kind!r} (known: {', '.join(SET_CV_KINDS)})")
    out = []
    for fold, scored in groups:
        train = [n for n in answerable if n not in scored]
        if train:
            out.append((fold, train, scored))
    return out


def check_set_cv(answerable_sets: Sequence[str], corpora: Sequence[str], kind: str) -> None:
    """Refuse, before any query, a set cross-validation the sets cannot give."""
    if kind == CvMethod.SETS and len(set(answerable_sets)) < 2:
        raise LookupLabError(
            "leave-one-set-out needs at least two eval sets with answerable cases (each is chosen on the others); "
            "give more sets, or use --cv kfold"
        )
    if kind == CvMethod.CORPORA and len(set(corpora)) < 2:
        raise LookupLabError("leave-one-corpus-out needs answerable sets of at least two corpora")


def hold_out(table: CaseTable, kind: str, *, tiebreak: Sequence[float], rule: str = "mean", current: int) -> SetCrossValidation:
    """Each fold's choice on its training sets and its figures on the sets it held out (`current`: the row of
    `table` that holds the current settings, to mark a held-out set the choice loses)."""
    names, per_set = table.set_mrr()
    column = {n: i for i, n in enumerate(names)}
    best = choose(per_set, range(len(names)), tiebreak, rule)
    rows = []
    for fold, train, scored in folds_of(table, kind):
        chosen = choose(per_set, [column[n] for n in train], tiebreak, rule)
        for name in scored:
            rows.append(
                HeldOutRow(
                    fold,
                    name,
                    table.corpus_of(name),
                    table.is_answerable(name),
                    tuple(train),
                    chosen,
                    table.figures(chosen, name),
                    table.figures(best, name),
                    table.figures(current, name),
                )
            )
    return SetCrossValidation(kind, rule, best, tuple(rows))


def below_on(table: CaseTable, point: int, reference: int) -> list[str]:
    """The answerable sets on which `point` is below `reference` (mrr@10 lower by more than LOSES_BY)."""
    names, per_set = table.set_mrr()
    return [n for i, n in enumerate(names) if per_set[point, i] < per_set[reference, i] - LOSES_BY]
