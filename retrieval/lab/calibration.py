"""Fitting the support estimate (`retrieval.core.support`) to eval sets and choosing its claim threshold, under
cross-validation; each case is read against its knowledge base's SupportNorms. The threshold maximises the worst set's
promise over its target, answer-removed cases included (docs/quality.md, "The support estimate").
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.core.candidates import Candidate, without
from retrieval.core.pipeline import Pipeline
from retrieval.core.ranking import ResultItem
from retrieval.core.runner import rank_and_assess
from retrieval.core.support import SupportFeatures, SupportModel, auc, fit, fit_calibration, model_inputs, reference_norms
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import LookupLabError
from retrieval.evals.configs import DEPTH
from retrieval.evals.reliability import reliability
from retrieval.evals.set_folds import CvMethod
from retrieval.lab.sweep_signals import CaseSignals, QueryKey, eval_pipeline, query_keys
from retrieval.types.models import DEFAULT_MODEL
from retrieval.types.modes import L1Status

CORRECT_SUPPORTED_TARGET = 0.90  # of hit@1
UNANSWERABLE_UNSUPPORTED_TARGET = 0.85
SIBLING_TARGET = 0.5  # of the answer-removed cases, left unsupported (their top is the right entry's nearest sibling)
ANSWER_REMOVED = " (answer removed)"
DEEPER = 4  # candidates fetched past the pipeline's depth, so a list without the removed answer is still full
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
    norms: SupportNorms | None = None  # its knowledge base's baselines (None: the model's reference ones)
    derived: bool = False  # an answerable case run again with its answer removed

    @property
    def source_set(self) -> str:
        """The eval set the case came from: held out together with the cases derived from it."""
        return self.set_name.removesuffix(ANSWER_REMOVED) if self.derived else self.set_name

    def inputs(self, embedding_model: str) -> np.ndarray:
        """What the support model reads of this case."""
        return model_inputs(self.features, self.norms or reference_norms(embedding_model))


def signal_keys(settings: Settings) -> tuple[QueryKey, ...]:
    """The queries whose candidates a calibration reads: the lookup's, DEEPER candidates deeper."""
    return tuple(replace(k, depth=k.depth + DEEPER) for k in query_keys(settings))


def case_support(signals: Sequence[CaseSignals], settings: Settings, *, answer_removed: bool = True) -> list[CaseSupport]:
    """Rank every case as the lookup would at `settings` (the runner's rank_and_assess, on candidates fetched by
    `signal_keys`) and take its top result's support features, with its knowledge base's baselines; with
    `answer_removed`, each answerable case again without its expected entries."""
    out = []
    keys = signal_keys(settings)
    pipeline = eval_pipeline(settings)
    depth = pipeline.queries[0].depth
    for s in signals:
        variants = [(s.set_name, frozenset[str](), False)]
        if answer_removed and s.relevant:
            variants.append((s.set_name + ANSWER_REMOVED, s.relevant, True))
        for set_name, drop, derived in variants:
            case = _case(s, [s.found[k] for k in keys], drop, depth, pipeline, settings, set_name, derived)
            if case is not None:
                out.append(case)
    return out


def _case(
    s: CaseSignals,
    deep: Sequence[Sequence[Candidate]],
    drop: frozenset[str],
    depth: int,
    pipeline: Pipeline,
    settings: Settings,
    set_name: str,
    derived: bool,
) -> CaseSupport | None:
    found = without(deep, drop, depth)
    cards = {c.entry_id: c.similarity for c in (deep[1] if len(deep) > 1 else ()) if c.similarity is not None}

    def fill(results: Sequence[ResultItem]) -> tuple[ResultItem, ...]:
        """The lookup's card similarity of a result only BM25F found (the BM25F hit is the entry's card)."""
        return tuple(
            replace(r, l1_score=cards[r.entry_id])
            if r.l1_score is None and r.lexical_score is not None and r.entry_id in cards
            else r
            for r in results
        )

    l0 = tuple(m for m in s.l0 if m.entry_id not in drop)
    status = L1Status.OK if any(found) else L1Status.EMPTY
    k = max(DEPTH, settings.top_k)
    ranking, relevance = rank_and_assess(l0, found, pipeline, settings.options(), s.query, status, k=k, fill=fill)
    if not ranking or relevance.features is None:
        return None
    top = ranking[0]
    answerable = bool(s.relevant) and not derived
    right = answerable and top.entry_id in s.relevant
    return CaseSupport(
        s.set_name if not derived else set_name,
        s.case_id,
        answerable,
        right,
        top.named,
        relevance.features,
        s.corpus,
        s.norms,
        derived,
    )


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


def target_of(case: CaseSupport) -> float:
    """The promise a case's set is held to."""
    if case.derived:
        return SIBLING_TARGET
    return CORRECT_SUPPORTED_TARGET if case.answerable else UNANSWERABLE_UNSUPPORTED_TARGET


def _worst(cases: Sequence[CaseSupport], claimed: Sequence[bool]) -> float:
    sizes = {n: sum(c.set_name == n for c in cases) for n in {c.set_name for c in cases}}
    target = {c.set_name: target_of(c) for c in cases}
    ratios = [v / target[n] for n, v in promises(cases, claimed).items() if sizes[n] >= MIN_SET]
    return min(ratios, default=0.0)


def estimates(model: SupportModel, cases: Sequence[CaseSupport], embedding_model: str = DEFAULT_MODEL) -> list[float]:
    """The support estimate of every case, each read against its own knowledge base's baselines."""
    reference = reference_norms(embedding_model)
    return [model.probability(c.features, c.norms or reference) for c in cases]


def claims(
    model: SupportModel, cases: Sequence[CaseSupport], threshold: float | None = None, embedding_model: str = DEFAULT_MODEL
) -> list[bool]:
    t = model.cut(threshold)
    return [c.named or p >= t for c, p in zip(cases, estimates(model, cases, embedding_model), strict=True)]


def fit_model(cases: Sequence[CaseSupport], *, fitted_on: str = "", embedding_model: str = DEFAULT_MODEL) -> SupportModel:
    """The logistic model (sets weighted alike) of the eval sets' own cases, rescaled on them as they come, and the
    threshold that best keeps every promise on `cases` (answer-removed ones included)."""
    real = [c for c in cases if not c.derived]
    x = np.vstack([c.inputs(embedding_model) for c in real])
    y = np.array([float(c.right) for c in real])
    model = fit(x, y, _balanced(real))
    model = replace(model, calibration=fit_calibration([model.score(row) for row in x], y))
    probs = estimates(model, cases, embedding_model)
    best = max(
        THRESHOLDS, key=lambda t: (_worst(cases, [c.named or p >= t for c, p in zip(cases, probs, strict=True)]), -abs(t - 0.5))
    )
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
    """Promises per set (answer-removed sets included); AUC and reliability over the eval sets' own cases only."""
    real = [i for i, c in enumerate(cases) if not c.derived]
    per_set_auc, per_set_rel = {}, {}
    for name in sorted({cases[i].set_name for i in real}):
        idx = [i for i in real if cases[i].set_name == name]
        per_set_auc[name] = auc([probabilities[i] for i in idx], [cases[i].right for i in idx])
        per_set_rel[name] = _reliability([probabilities[i] for i in idx], [cases[i].right for i in idx])
    per_corpus = {}
    for corpus in sorted({cases[i].corpus for i in real}):
        idx = [i for i in real if cases[i].corpus == corpus]
        per_corpus[corpus] = _reliability([probabilities[i] for i in idx], [cases[i].right for i in idx])
    return {
        "auc": auc([probabilities[i] for i in real], [cases[i].right for i in real]),
        "auc_per_set": per_set_auc,
        "promises": promises(cases, claimed),
        "answerable": {name: any(c.answerable for c in cases if c.set_name == name) for name in promises(cases, claimed)},
        "reliability_per_set": per_set_rel,
        "reliability_per_corpus": per_corpus,
    }


def _reliability(probabilities: Sequence[float], right: Sequence[bool]) -> dict[str, Any] | None:
    rel = reliability([min(max(p, 0.0), 1.0) for p in probabilities], right)
    return None if rel is None else rel.to_dict()


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
        return [c.source_set for c in cases]
    if cv == CvMethod.CORPORA:
        return [c.corpus for c in cases]
    return [str(f) for f in _stratified(cases, folds, seed)]


def held_out_figures(
    cases: Sequence[CaseSupport], cv: str, *, folds: int = 5, seed: int = 0, embedding_model: str = DEFAULT_MODEL
) -> dict[str, Any]:
    """Each case scored by a model and threshold fitted without its fold: its set, its corpus, or a stratified
    fold. A fold whose training cases hold no right or no wrong top result cannot be fitted: its cases are left
    out, and named in `not_scored`."""
    group = _groups(cases, cv, folds, seed)
    held_probs: list[float | None] = [None] * len(cases)
    held_claims = [False] * len(cases)
    skipped = []
    for g in sorted(set(group)):
        train = [c for c, k in zip(cases, group, strict=True) if k != g]
        if len({c.right for c in train if not c.derived}) < 2:
            skipped.append(g)
            continue
        m = fit_model(train, embedding_model=embedding_model)
        held = [i for i in range(len(cases)) if group[i] == g]
        for i, p in zip(held, estimates(m, [cases[i] for i in held], embedding_model), strict=True):
            held_probs[i] = p
            held_claims[i] = cases[i].named or p >= m.threshold
    kept = [i for i, p in enumerate(held_probs) if p is not None]
    out = _figures([cases[i] for i in kept], [p for p in held_probs if p is not None], [held_claims[i] for i in kept])
    return {**out, "not_scored": skipped}


def calibrate(
    cases: Sequence[CaseSupport],
    *,
    cv: str = "kfold",
    folds: int = 5,
    seed: int = 0,
    fitted_on: str = "",
    embedding_model: str = DEFAULT_MODEL,
) -> Calibration:
    """The model fitted on every case, its in-sample figures, and the held-out figures of fitting that way: with
    `cv` "sets" each set is scored by a model and threshold fitted on the other sets (a style it did not see), and
    each corpus by one fitted on the other corpus's sets; "kfold": folds stratified by set."""
    if cv not in CALIBRATION_CVS:
        raise LookupLabError(f"--cv {cv!r}: one of {', '.join(CALIBRATION_CVS)}")
    model = fit_model(cases, fitted_on=fitted_on, embedding_model=embedding_model)
    probs = estimates(model, cases, embedding_model)
    in_sample = _figures(cases, probs, claims(model, cases, embedding_model=embedding_model))
    held = held_out_figures(cases, cv, folds=folds, seed=seed, embedding_model=embedding_model)
    by_corpus = None
    if cv == CvMethod.SETS and len({c.corpus for c in cases}) >= 2:
        by_corpus = held_out_figures(cases, "corpora", embedding_model=embedding_model)
    return Calibration(model, in_sample, held, cv, by_corpus)
