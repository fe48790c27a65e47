"""Semantic support: the estimated chance that the top result is right, and the claim made from it.
A logistic model (one per embedding model) of the top result's signals read against the knowledge base's SupportNorms,
fitted on labelled eval sets and rescaled to be calibrated; an entry the query names in full is always supported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from retrieval.core.candidates import Candidate
from retrieval.core.support_norms import Baseline, SupportNorms

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SupportFeatures:
    """What the estimate looks at, for the top result of one lookup."""

    similarity: float  # cosine of the query to the top result's best chunk (0 when unknown)
    similarity_margin: float  # that, minus the best similarity of any other candidate
    lexical_share: float  # the top result's BM25F score over the best BM25F score of the query
    lexical_per_word: float  # the top result's BM25F score over the query's distinct words
    lexical_margin: float  # (best - second best BM25F score) / best
    vector_rr: float  # 1 / the top result's rank in the vector list (0: not there)
    lexical_rr: float  # 1 / its rank in the BM25F list (0: not there)
    fused_margin: float  # (first - second fused score) / first
    agreement: float  # 1 when the vector and BM25F lists both rank it first
    query_length: float  # log of the query's distinct words: what a similarity means differs for a title and a paragraph

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, f.name) for f in fields(self)], dtype=float)

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in asdict(self).items()}


FEATURE_NAMES = tuple(f.name for f in fields(SupportFeatures))


def query_words(text: str) -> int:
    """Distinct words of a query (at least 1): what a BM25F score is divided by."""
    return max(1, len({w.lower() for w in _WORD.findall(text)}))


def features_of(
    top_id: str,
    top_similarity: float | None,
    ranks: dict[str, int],
    fused_scores: Sequence[float],
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    query: str,
) -> SupportFeatures:
    """The features of a ranking's top entry `top_id`, given the candidates both L1 queries returned."""
    sims = {c.entry_id: c.similarity for c in (*lexical, *vector) if c.similarity is not None}
    sim = top_similarity if top_similarity is not None else sims.get(top_id, 0.0) or 0.0
    other = max((s for e, s in sims.items() if e != top_id), default=0.0)
    lex = sorted((c.score for c in lexical), reverse=True)
    own = next((c.score for c in lexical if c.entry_id == top_id), 0.0)
    best = lex[0] if lex else 0.0
    vr, br = ranks.get("vector"), ranks.get("bm25")
    first = fused_scores[0] if fused_scores else 0.0
    return SupportFeatures(
        similarity=sim,
        similarity_margin=sim - other,
        lexical_share=own / best if best > 0 else 0.0,
        lexical_per_word=own / query_words(query),
        lexical_margin=(lex[0] - lex[1]) / lex[0] if len(lex) > 1 and lex[0] > 0 else 1.0,
        vector_rr=1.0 / vr if vr else 0.0,
        lexical_rr=1.0 / br if br else 0.0,
        fused_margin=(first - fused_scores[1]) / first if len(fused_scores) > 1 and first > 0 else 1.0,
        agreement=float(vr == 1 and br == 1),
        query_length=math.log(query_words(query)),
    )


# What the model reads of a lookup: the top result's similarity and BM25F score per word each against what a sibling
# gets in this knowledge base for a query this long (its SupportNorms), the similarity margin, whether both lists
# rank it first, and the query's length.
MODEL_INPUTS = ("similarity_vs_sibling", "similarity_margin", "lexical_vs_sibling", "agreement", "query_length")


def model_inputs(features: SupportFeatures, norms: SupportNorms) -> np.ndarray:
    length = features.query_length
    return np.array(
        [
            features.similarity - norms.expected("similarity").at(length),
            features.similarity_margin,
            features.lexical_per_word - norms.expected("lexical_per_word").at(length),
            features.agreement,
            length,
        ],
        dtype=float,
    )


@dataclass(frozen=True)
class SupportModel:
    """P(top result right) = sigmoid(a · (b + w · (x - mean) / scale) + c): a logistic model of MODEL_INPUTS whose
    score is rescaled (`calibration` = (a, c)) so that the estimate is calibrated on the sets it was fitted on."""

    intercept: float
    weights: tuple[float, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    threshold: float  # the claim is made at or above this probability
    fitted_on: str = ""  # what it was fitted on, for people
    calibration: tuple[float, float] = (1.0, 0.0)

    def cut(self, override: float | None = None) -> float:
        """The claim threshold: `override` (the support_threshold setting) when given, else the fitted one."""
        return self.threshold if override is None else override

    def score(self, x: np.ndarray) -> float:
        """The logistic model's log-odds of model inputs `x`, before the calibration."""
        return self.intercept + float(np.dot(np.asarray(self.weights), (x - np.asarray(self.means)) / np.asarray(self.scales)))

    def probability(self, features: SupportFeatures, norms: SupportNorms) -> float:
        a, c = self.calibration
        z = a * self.score(model_inputs(features, norms)) + c
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_dict(self) -> dict[str, object]:
        return {
            "intercept": round(self.intercept, 4),
            "weights": dict(zip(MODEL_INPUTS, (round(w, 4) for w in self.weights), strict=True)),
            "means": dict(zip(MODEL_INPUTS, (round(m, 4) for m in self.means), strict=True)),
            "scales": dict(zip(MODEL_INPUTS, (round(s, 4) for s in self.scales), strict=True)),
            "calibration": [round(v, 4) for v in self.calibration],
            "threshold": round(self.threshold, 3),
            "fitted_on": self.fitted_on,
        }


def fit(x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray | None = None, *, l2: float = 1.0) -> SupportModel:
    """A logistic model of y (1: the top result is right) on the feature rows x, L2-penalised, each row
    weighted by `sample_weight` (e.g. 1 / its set's size, so every set counts alike). Threshold 0.5."""
    from scipy.optimize import minimize

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    means, scales = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - means) / scales

    def loss(theta: np.ndarray) -> float:
        p = 1.0 / (1.0 + np.exp(-(z @ theta[1:] + theta[0])))
        ll = y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)
        return float(-np.sum(w * ll) / w.sum() + l2 * np.sum(theta[1:] ** 2) / len(y))

    theta = minimize(loss, np.zeros(x.shape[1] + 1), method="L-BFGS-B").x
    return SupportModel(float(theta[0]), tuple(map(float, theta[1:])), tuple(map(float, means)), tuple(map(float, scales)), 0.5)


def fit_calibration(scores: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """(a, c) of sigmoid(a · score + c) fitted to the outcomes `y` as they come (Platt scaling): the estimate is then
    calibrated on that mix of cases, and its order (so the claims) does not change."""
    from scipy.optimize import minimize

    s, t = np.asarray(scores, dtype=float), np.asarray(y, dtype=float)

    def loss(theta: np.ndarray) -> float:
        p = 1.0 / (1.0 + np.exp(-(theta[0] * s + theta[1])))
        return float(-np.mean(t * np.log(p + 1e-12) + (1 - t) * np.log(1 - p + 1e-12)))

    a, c = minimize(loss, np.array([1.0, 0.0]), method="L-BFGS-B", bounds=[(1e-3, None), (None, None)]).x
    return float(a), float(c)


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a right top result scores above a wrong one (None without both)."""
    s, lab = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = s[lab], s[~lab]
    if len(pos) == 0 or len(neg) == 0:
        return None
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


# Fitted by `python -m retrieval calibrate` (retrieval.lab.calibration) on the shared answerable and unanswerable sets
# of both corpora at the default fusion weights, each corpus read against its own SupportNorms; docs/quality.md has the
# cross-validated figures. REFERENCE_NORMS: the mean of the two shared corpora's self-fitted baselines, for a knowledge
# base that has not been calibrated yet.
SUPPORT_MODELS: dict[str, SupportModel] = {
    "bge-small-en-v1.5": SupportModel(
        1.0434,
        (1.7368, 0.7598, 1.1479, 0.1041, 0.7508),
        (-0.0074, 0.0414, 0.4528, 0.6168, 2.251),
        (0.0943, 0.0683, 0.9898, 0.4862, 0.5726),
        0.62,
        "bge-small-en-v1.5 2026-12-05: 8 shared sets, fusion 2.5/1/0, name 2, depth 15, bm25_last",
        (0.8985, 0.5626),
    ),
    "all-MiniLM-L6-v2": SupportModel(
        0.6721,
        (1.1957, 0.2605, 0.9619, 0.7388, 0.5285),
        (-0.0213, 0.0794, 0.4412, 0.6078, 2.251),
        (0.179, 0.1043, 1.0136, 0.4882, 0.5726),
        0.6,
        "all-MiniLM-L6-v2 2026-12-05: 8 shared sets, fusion 2.5/1/0, name 2, depth 15, bm25_last",
        (0.9453, 0.5109),
    ),
    "e5-small-v2": SupportModel(
        0.9351,
        (1.4219, 1.0464, 1.2655, 0.0653, 0.6779),
        (0.001, 0.015, 0.428, 0.6257, 2.251),
        (0.0345, 0.0259, 0.9911, 0.4839, 0.5726),
        0.5,
        "e5-small-v2 2026-12-05: 8 shared sets, fusion 2.5/1/0, name 2, depth 15, bm25_last",
        (0.9435, 0.6248),
    ),
}
REFERENCE_NORMS: dict[str, SupportNorms] = {
    "bge-small-en-v1.5": SupportNorms(
        (("similarity", Baseline(0.7366, 0.0209)), ("lexical_per_word", Baseline(1.3227, 0.0574))),
        "reference",
        0,
        "the mean of the shared corpora's own baselines (kubevirt, runbooks)",
    ),
    "all-MiniLM-L6-v2": SupportNorms(
        (("similarity", Baseline(0.5993, 0.037)), ("lexical_per_word", Baseline(1.3152, 0.0451))),
        "reference",
        0,
        "the mean of the shared corpora's own baselines (kubevirt, runbooks)",
    ),
    "e5-small-v2": SupportNorms(
        (("similarity", Baseline(0.8604, 0.0055)), ("lexical_per_word", Baseline(1.3762, 0.0437))),
        "reference",
        0,
        "the mean of the shared corpora's own baselines (kubevirt, runbooks)",
    ),
}


def support_model(embedding_model: str) -> SupportModel:
    """The support estimate fitted for an embedding model (its cosines have their own scale)."""
    return SUPPORT_MODELS[embedding_model]


def reference_norms(embedding_model: str) -> SupportNorms:
    """The baselines a knowledge base is read against until it has its own (`calibrate --self`, or an ingest)."""
    return REFERENCE_NORMS[embedding_model]
