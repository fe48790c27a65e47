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
from retrieval.core.lookup import weights_of
from retrieval.core.ranking import fuse
from retrieval.core.support import SupportFeatures, SupportModel, auc, features_of, fit
from retrieval.evals.configs import DEPTH
from retrieval.lab.sweep_signals import CaseSignals, query_keys

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


def case_support(signals: Sequence[CaseSignals], settings: Settings) -> list[CaseSupport]:
    """Rank every case as the lookup would at `settings` and take its top result's support features."""
    out = []
    keys = query_keys(settings)
    for s in signals:
        vector = s.found[keys[0]]
        lexical = s.found[keys[1]] if len(keys) > 1 else ()
        ranking = fuse(s.l0, vector, lexical, k=max(DEPTH, settings.top_k), weights=weights_of(settings))
        if not ranking:
            continue
        top = ranking[0]
        f = features_of(top.entry_id, top.l1_score, dict(top.ranks), [r.score for r in ranking], vector, lexical, s.query)
        out.append(CaseSupport(s.set_name, s.case_id, bool(s.relevant), top.entry_id in s.relevant, top.named, f))
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


@dataclass(frozen=True)
class Calibration:
    model: SupportModel
    in_sample: dict[str, Any]
    held_out: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model.to_dict(), "in_sample": self.in_sample, "held_out": self.held_out}


def _figures(cases: Sequence[CaseSupport], probabilities: Sequence[float], claimed: Sequence[bool]) -> dict[str, Any]:
    per_set_auc = {}
    for name in sorted({c.set_name for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.set_name == name]
        per_set_auc[name] = auc([probabilities[i] for i in idx], [cases[i].right for i in idx])
    return {
        "auc": auc(probabilities, [c.right for c in cases]),
        "auc_per_set": per_set_auc,
        "promises": promises(cases, claimed),
    }


def calibrate(cases: Sequence[CaseSupport], *, folds: int = 5, seed: int = 0, fitted_on: str = "") -> Calibration:
    """The model fitted on every case, its in-sample figures, and the held-out figures of fitting that way
    (folds stratified by set: each case is scored by a model and threshold that never saw it)."""
    model = fit_model(cases, fitted_on=fitted_on)
    probs = [model.probability(c.features) for c in cases]
    in_sample = _figures(cases, probs, claims(model, cases))
    rnd = random.Random(seed)
    fold_of = [0] * len(cases)
    for name in sorted({c.set_name for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.set_name == name]
        rnd.shuffle(idx)
        for j, i in enumerate(idx):
            fold_of[i] = j % folds
    held_probs, held_claims = [0.0] * len(cases), [False] * len(cases)
    for f in range(folds):
        train = [c for c, g in zip(cases, fold_of, strict=True) if g != f]
        m = fit_model(train)
        for i, c in enumerate(cases):
            if fold_of[i] == f:
                # a probability shifted by the fold's own threshold, so the pooled AUC compares like with like
                held_probs[i] = m.probability(c.features) - m.threshold
                held_claims[i] = c.named or held_probs[i] >= 0
    return Calibration(model, in_sample, _figures(cases, held_probs, held_claims))
