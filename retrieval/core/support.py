"""Semantic support: the estimated chance that the top result is right, and the claim made from it.

The estimate is a logistic model over features of one lookup whose scale does not grow with the query's length:
the top result's similarity and its margin over the next most similar entry, its BM25F score per query word
and the BM25F margin, the ranks each signal gave it, and the fused score's margin; and the query's length itself
(log of its distinct words), so that the model can read a similarity differently for a six-word title and a
forty-word alert description (held out, the worst-kept promise over the shared sets went from 0.71 to 0.85 of
its target with it). It is fitted per embedding
model (cosines of two models are not on one scale) by `fit`, on the shared answerable and unanswerable sets
of both corpora, and the claim threshold is chosen by cross-validation (`python -m retrieval calibrate`).
An entry the query names in full is always supported: the user said which entry they meant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from retrieval.core.candidates import Candidate

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


@dataclass(frozen=True)
class SupportModel:
    """Logistic regression on standardised features: P(top result right) = sigmoid(b + w · (x - mean) / scale)."""

    intercept: float
    weights: tuple[float, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    threshold: float  # the claim is made at or above this probability
    fitted_on: str = ""  # what it was fitted on, for people

    def cut(self, override: float | None = None) -> float:
        """The claim threshold: `override` (the support_threshold setting) when given, else the fitted one."""
        return self.threshold if override is None else override

    def probability(self, features: SupportFeatures) -> float:
        x = (features.vector() - np.asarray(self.means)) / np.asarray(self.scales)
        z = self.intercept + float(np.dot(np.asarray(self.weights), x))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_dict(self) -> dict[str, object]:
        return {
            "intercept": round(self.intercept, 4),
            "weights": dict(zip(FEATURE_NAMES, (round(w, 4) for w in self.weights), strict=True)),
            "means": dict(zip(FEATURE_NAMES, (round(m, 4) for m in self.means), strict=True)),
            "scales": dict(zip(FEATURE_NAMES, (round(s, 4) for s in self.scales), strict=True)),
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


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a right top result scores above a wrong one (None without both)."""
    s, lab = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = s[lab], s[~lab]
    if len(pos) == 0 or len(neg) == 0:
        return None
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


# Fitted by `python -m retrieval calibrate` (retrieval.lab.calibration) on the shared answerable and unanswerable
# sets of both corpora (8 sets, 334 cases) at the default fusion weights; docs/quality.md has the cross-validated figures.
SUPPORT_MODELS: dict[str, SupportModel] = {
    "bge-small-en-v1.5": SupportModel(
        1.0086,
        (1.5595, 0.4081, -0.3855, 1.0095, 0.3888, 0.1306, 0.1656, 0.1313, 0.1317, 0.6537),
        (0.7752, 0.0409, 0.9663, 1.8779, 0.2639, 0.7890, 0.9004, 0.1461, 0.6168, 2.2510),
        (0.0942, 0.0689, 0.1314, 1.0433, 0.2122, 0.3282, 0.2354, 0.1365, 0.4862, 0.5726),
        0.38,
        "bge-small-en-v1.5, vector 2.5 lexical 1 name 2, depth 15, BM25F missing at its last; shared sets of both corpora",
    ),
    "all-MiniLM-L6-v2": SupportModel(
        0.7235,
        (1.1438, 0.0632, -0.3262, 0.8058, 0.3267, 0.0136, 0.3885, 0.5234, 0.4048, 0.6549),
        (0.6535, 0.0793, 0.9176, 1.8291, 0.2639, 0.8873, 0.8169, 0.1875, 0.6078, 2.2510),
        (0.1844, 0.1044, 0.2235, 1.0775, 0.2122, 0.2483, 0.3177, 0.1649, 0.4882, 0.5726),
        0.44,
        "all-MiniLM-L6-v2, vector 2.5 lexical 1 name 2, depth 15, BM25F missing at its last; shared sets of both corpora",
    ),
    "e5-small-v2": SupportModel(
        0.8877,
        (1.1644, 0.6157, -0.1042, 1.0111, 0.2347, 0.2742, 0.1359, 0.4907, -0.0992, 0.6460),
        (0.8730, 0.0150, 0.9640, 1.8774, 0.2639, 0.7846, 0.9054, 0.1175, 0.6257, 2.2510),
        (0.0351, 0.0259, 0.1351, 1.0436, 0.2122, 0.3415, 0.2346, 0.1154, 0.4839, 0.5726),
        0.40,
        "e5-small-v2, vector 2.5 lexical 1 name 2, depth 15, BM25F missing at its last; shared sets of both corpora",
    ),
}


def support_model(embedding_model: str) -> SupportModel:
    """The support estimate fitted for an embedding model (its cosines have their own scale)."""
    return SUPPORT_MODELS[embedding_model]
