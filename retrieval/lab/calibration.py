"""Fitting the support estimate (`retrieval.core.support`) to eval sets, and choosing its claim threshold, under
cross-validation: the model and the threshold are fitted on the training folds and scored on the held-out one.

The threshold is the one that best meets the two promises of the claim on every set at once: on an answerable
set, the right answers that get the claim (correct_supported / hit@1, wanted ≥ 0.90); on an unanswerable set,
the queries left without it (wanted ≥ 0.85). It maximises the smallest of those ratios over the sets (each over
its target), so no style of query is given up for another.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.core.run import rank_and_assess
from retrieval.core.support import SupportFeatures, SupportModel, auc, fit
from retrieval.errors import LookupLabError
from retrieval.evals.configs import DEPTH
from retrieval.evals.set_folds import CvMethod
from retrieval.lab.sweep_signals import CaseSignals, eval_pipeline, query_keys
from retrieval.types.modes import L1Status

CORRECT_SUPPORTED_TARGET = 0.90  # of hit@1
UNANSWERABLE_UNSUPPORTED_TARGET = 0.85
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.10, 0.91, 0.02))
MIN_SET = 5  # sets with fewer cases inform the fit but not the threshold


@dataclass(frozen=True)
class CaseSupport:
    """One case at given settings: its features, whether its top result is right, and whether it is named."""

    set_name: str
    case_id: str
    answerable: bool
    right: bool
    named: bool
    features: SupportFeatures
    corpus: str = ""  # the corpus folder's name: leave-one-corpus-out holds out all its sets


def case_support(signals: Sequence[CaseSignals], settings: Settings) -> list[CaseSupport]:
    """Rank every case as the lookup would at `settings` (the runner's rank_and_assess) and take its top result's
    support features."""
    out = []
    keys = query_keys(settings)
    pipeline = eval_pipeline(settings)
    for s in signals:
        found = tuple(s.found[k] for k in keys)
        status = L1Status.OK if any(found) else L1Status.EMPTY
        ranking, relevance = rank_and_assess(s.l0, found, pipeline, settings, s.query, status, k=max(DEPTH, settings.top_k))
        if not ranking or relevance.features is None:
            continue
        top = ranking[0]
        f = relevance.features
        out.append(CaseSupport(s.set_name, s.case_id, bool(s.relevant), top.entry_id in s.relevant, top.named, f, s.corpus))
    return out


def _balanced(cases: Sequence[CaseSupport]) -> np.ndarray:
    """Weights that give every set the same total."""
    sizes: dict[str, int] = {}
    for c in cases:
        sizes[c.set_name] = sizes.get(c.set_name, 0) + 1
    return np.array([1.0 / sizes[c.set_name] for c in cases])


def promises(cases: Sequence[CaseSupport], claimed: Sequence[bool]) -> dict[str, float]:
    """Per set: correct_supported / hit@1 (answerable) or the unsupported share (unanswerable)."""
    out = {}
    for name in sorted({c.set_name for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.set_name == name]
        if cases[idx[0]].answerable:
            right = [i for i in idx if cases[i].right]
            out[name] = sum(bool(claimed[i]) for i in right) / len(right) if right else 1.0
        else:
            out[name] = 1.0 - sum(bool(claimed[i]) for i in idx) / len(idx)
    return out


def _worst(cases: Sequence[CaseSupport], claimed: Sequence[bool]) -> float:
    sizes = {n: sum(c.set_name == n for c in cases) for n in {c.set_name for c in cases}}
    answerable = {c.set_name: c.answerable for c in cases}
    ratios = [
        v / (CORRECT_SUPPORTED_TARGET if answerable[n] else UNANSWERABLE_UNSUPPORTED_TARGET)
        for n, v in promises(cases, claimed).items()
        if sizes[n] >= MIN_SET
    ]
    return min(ratios, default=0.0)


def claims(model: SupportModel, cases: Sequence[CaseSupport], threshold: float | None = None) -> list[bool]:
    t = model.cut(threshold)
    return [c.named or model.probability(c.features) >= t for c in cases]


def fit_model(cases: Sequence[CaseSupport], *, fitted_on: str = "") -> SupportModel:
    """The logistic model (sets weighted alike) and the threshold that best keeps both promises on `cases`."""
    x = np.vstack([c.features.vector() for c in cases])
    y = np.array([float(c.right) for c in cases])
    model = fit(x, y, _balanced(cases))
    best = max(THRESHOLDS, key=lambda t: (_worst(cases, claims(model, cases, t)), -abs(t - 0.5)))
    return replace(model, threshold=float(best), fitted_on=fitted_on)


CALIBRATION_CVS = ("sets", "corpora", "kfold")


@dataclass(frozen=True)
class Calibration:
    """The model fitted on every case, its in-sample figures, and held-out figures: `held_out` by the validation
    `cv` names (leave one set out, leave one corpus out, or stratified k-fold), and with "sets" also
    `held_out_corpora` (leave one corpus out) when the cases span two corpora."""

    model: SupportModel
    in_sample: dict[str, Any]
    held_out: dict[str, Any]
    cv: str = "kfold"
    held_out_corpora: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "cv": self.cv,
            "in_sample": self.in_sample,
            "held_out": self.held_out,
            "held_out_corpora": self.held_out_corpora,
        }


def _figures(cases: Sequence[CaseSupport], probabilities: Sequence[float], claimed: Sequence[bool]) -> dict[str, Any]:
    per_set_auc = {}
    for name in sorted({c.set_name for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.set_name == name]
        per_set_auc[name] = auc([probabilities[i] for i in idx], [cases[i].right for i in idx])
    return {
        "auc": auc(probabilities, [c.right for c in cases]),
        "auc_per_set": per_set_auc,
        "promises": promises(cases, claimed),
        "answerable": {name: any(c.answerable for c in cases if c.set_name == name) for name in per_set_auc},
    }


def _stratified(cases: Sequence[CaseSupport], folds: int, seed: int) -> list[int]:
    rnd = random.Random(seed)
    fold_of = [0] * len(cases)
    for name in sorted({c.set_name for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.set_name == name]
        rnd.shuffle(idx)
        for j, i in enumerate(idx):
            fold_of[i] = j % folds
    return fold_of


def _groups(cases: Sequence[CaseSupport], cv: str, folds: int, seed: int) -> list[str]:
    """The fold of every case: its set ("sets"), its corpus ("corpora"), or a stratified fold number ("kfold")."""
    if cv == CvMethod.SETS:
        return [c.set_name for c in cases]
    if cv == CvMethod.CORPORA:
        return [c.corpus for c in cases]
    return [str(f) for f in _stratified(cases, folds, seed)]


def held_out_figures(cases: Sequence[CaseSupport], cv: str, *, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Each case scored by a model and threshold fitted without its fold: its set, its corpus, or a stratified
    fold. A fold whose training cases hold no right or no wrong top result cannot be fitted: its cases are left
    out, and named in `not_scored`."""
    group = _groups(cases, cv, folds, seed)
    held_probs: list[float | None] = [None] * len(cases)
    held_claims = [False] * len(cases)
    skipped = []
    for g in sorted(set(group)):
        train = [c for c, k in zip(cases, group, strict=True) if k != g]
        if len({c.right for c in train}) < 2:
            skipped.append(g)
            continue
        m = fit_model(train)
        for i, c in enumerate(cases):
            if group[i] == g:
                # a probability shifted by the fold's own threshold, so the pooled AUC compares like with like
                shifted = m.probability(c.features) - m.threshold
                held_probs[i] = shifted
                held_claims[i] = c.named or shifted >= 0
    kept = [i for i, p in enumerate(held_probs) if p is not None]
    out = _figures([cases[i] for i in kept], [p for p in held_probs if p is not None], [held_claims[i] for i in kept])
    return {**out, "not_scored": skipped}


def calibrate(
    cases: Sequence[CaseSupport], *, cv: str = "kfold", folds: int = 5, seed: int = 0, fitted_on: str = ""
) -> Calibration:
    """The model fitted on every case, its in-sample figures, and the held-out figures of fitting that way: with
    `cv` "sets" each set is scored by a model and threshold fitted on the other sets (a style it did not see), and
    each corpus by one fitted on the other corpus's sets; "kfold": folds stratified by set."""
    if cv not in CALIBRATION_CVS:
        raise LookupLabError(f"--cv {cv!r}: one of {', '.join(CALIBRATION_CVS)}")
    model = fit_model(cases, fitted_on=fitted_on)
    probs = [model.probability(c.features) for c in cases]
    in_sample = _figures(cases, probs, claims(model, cases))
    held = held_out_figures(cases, cv, folds=folds, seed=seed)
    by_corpus = None
    if cv == CvMethod.SETS and len({c.corpus for c in cases}) >= 2:
        by_corpus = held_out_figures(cases, "corpora")
    return Calibration(model, in_sample, held, cv, by_corpus)
