"""Semantic support as a lookup reports it: the claim (`Relevance`) made from the support estimate of the top result,
its words, and which fit gave it. A fusion's top is judged by `assess`, one query's top alone by `assess_one`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.core.candidates import Candidate
from retrieval.core.ranking import ResultItem
from retrieval.core.support import SupportFeatures, SupportModel, features_of, reference_norms, support_model
from retrieval.core.support_norms import SupportNorms
from retrieval.types.modes import L1Status, SearchMode, Source

SUPPORTED = "supported answer in the knowledge base"
NOT_SUPPORTED = "no supported answer in the knowledge base"


@dataclass(frozen=True)
class Relevance:
    """How far the top result can be trusted. `confidence`: the estimated chance that it is right (None when
    nothing semantic was there to estimate from); `semantic_support`: the claim made from it."""

    semantic_support: bool
    level: str  # high | medium | low | none
    reason: str
    confidence: float | None = None
    threshold: float | None = None
    features: SupportFeatures | None = None
    fit: dict[str, Any] | None = field(default=None, compare=False)  # which fit gave the estimate: model and baselines

    @property
    def verdict(self) -> str:
        """The claim in the words an agent reads first."""
        return SUPPORTED if self.semantic_support else NOT_SUPPORTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "semantic_support": self.semantic_support,
            "verdict": self.verdict,
            "level": self.level,
            "reason": self.reason,
            "confidence": None if self.confidence is None else round(self.confidence, 4),
            "estimate": percent(self.confidence),
            "threshold": self.threshold,
            "features": None if self.features is None else self.features.to_dict(),
            "fit": self.fit,
        }


HIGH_CONFIDENCE = 0.8


def percent(chance: float | None) -> str:
    """The support estimate as people read it, the one wording of the tile, the relevance text, the CLI, the MCP
    result and the report: whole percents, and never 100 % or 0 %: an estimate has a resolution ("> 99%", "< 1%")."""
    if chance is None:
        return "–"
    if chance >= 0.995:
        return "> 99%"
    if chance < 0.005:
        return "< 1%"
    return f"{chance:.0%}"


def evidence_text(similarity: float, margin: float, lexical_per_word: float, sibling: float | None = None) -> str:
    """What the estimate read, in words: the similarity, against what a sibling entry gets in this knowledge base for a
    query this long (`sibling`) and against the most similar other candidate (a negative margin means another
    candidate is more similar than the top result), and BM25F per query word."""
    if margin >= 0:
        against = f"{margin:.2f} above the next most similar entry"
    else:
        against = f"{-margin:.2f} below another candidate, which is more similar than the top result"
    base = ""
    if sibling is not None:
        gap = similarity - sibling
        base = f" ({abs(gap):.2f} {'above' if gap >= 0 else 'below'} what a sibling entry gets here)"
    return f"similarity {similarity:.2f}{base}, {against}; BM25F {lexical_per_word:.1f} per query word"


def fit_words(fit: dict[str, Any] | None) -> str:
    """Which fit gave an estimate, as people read it."""
    if not fit:
        return "no support fit"
    base = fit.get("baselines") or {}
    if base.get("kind") == "self":
        where = f"this knowledge base's own baselines (fit {base.get('id')}, {base.get('probes')} probe runs)"
    else:
        where = "the reference baselines (this knowledge base has no fit of its own yet: ingest it or run calibrate --self)"
    return f"read against {where}"


def fit_of(support: SupportModel, norms: SupportNorms) -> dict[str, Any]:
    """Which fit gave an estimate, as recorded with the lookup: the labelled model and the knowledge base's baselines."""
    return {"model": support.fitted_on, "baselines": norms.describe()}


def assess(
    results: Sequence[ResultItem],
    l1_status: L1Status,
    *,
    support: SupportModel,
    norms: SupportNorms,
    vector: Sequence[Candidate] = (),
    lexical: Sequence[Candidate] = (),
    query: str = "",
    threshold: float | None = None,
    alone: SearchMode | None = None,
) -> Relevance:
    """The claim on the top result: the support estimate (`support`, read against this knowledge base's `norms`) of
    a fusion's top from the candidates of both L1 lists, or with `alone` of one query's top from its list (`vector`);
    claimed at `threshold` (default: the model's), and for an entry the query names in full whatever the estimate."""
    if not results:
        return Relevance(False, "none", "No L1 candidates." if alone else f"No L0 match and L1 {l1_status}: nothing found.")
    top = results[0]
    if alone is None and top.l1_score is None and not (vector or lexical):
        return Relevance(False, "low", f"Keyword evidence only (L0); L1 {l1_status}, so no semantic support.")
    if alone is None:
        scores = [r.score for r in results]
        features = features_of(top.entry_id, top.l1_score, dict(top.ranks), scores, vector, lexical, query)
    else:
        bm25, first, scores = alone is SearchMode.BM25, vector[0], [c.score for c in vector]
        signal = {"bm25" if bm25 else "vector": 1}
        vec, lex = ((), vector) if bm25 else (vector, ())
        features = features_of(first.entry_id, first.similarity, signal, scores, vec, lex, query)
    chance, cut, fit = support.probability(features, norms), support.cut(threshold), fit_of(support, norms)
    if alone is not None:
        claimed = chance >= cut
        reason = f"The {alone} query alone: an estimated {percent(chance)} chance that its top result is right."
        return Relevance(claimed, "medium" if claimed else "low", reason, chance, cut, features, fit)
    l0 = "; L0 agrees" if top.source == Source.BOTH else ""
    sibling = norms.expected("similarity").at(features.query_length)
    evidence = evidence_text(features.similarity, features.similarity_margin, features.lexical_per_word, sibling)
    if top.named:
        reason = (
            f"The query names this entry in full (its title or file name), so it is supported whatever the estimate "
            f"({percent(chance)}): {evidence}{l0}."
        )
        return Relevance(True, "high", reason, chance, cut, features, fit)
    if chance >= cut:
        level = "high" if chance >= max(HIGH_CONFIDENCE, cut) else "medium"
        reason = f"An estimated {percent(chance)} chance that it is right (support from {percent(cut)}): {evidence}{l0}."
        return Relevance(True, level, reason, chance, cut, features, fit)
    reason = (
        f"An estimated {percent(chance)} chance that it is right, below {percent(cut)}: {evidence}. A neighbour, not "
        f"semantic support: the corpus may not answer this{l0}."
    )
    return Relevance(False, "low", reason, chance, cut, features, fit)


def judge(
    results: Sequence[ResultItem],
    found: Sequence[Sequence[Candidate]],
    *,
    mode: SearchMode | None,
    fusion: bool,
    status: L1Status,
    embedding_model: str,
    norms: SupportNorms | None,
    threshold: float | None,
    query: str,
) -> Relevance:
    """The claim on a pipeline's ranking: none from L0 alone (`mode` None), the fusion's assessment, or one query's,
    by the embedding model's support estimate read against `norms` (None: the model's reference baselines)."""
    if mode is None:
        return Relevance(False, "low" if results else "none", "L0 alone: no semantic retrieval in this run.")
    vector = tuple(found[0]) if found else ()
    lexical = tuple(found[1]) if fusion and len(found) > 1 else ()
    return assess(
        results,
        status,
        support=support_model(embedding_model),
        norms=norms or reference_norms(embedding_model),
        vector=vector,
        lexical=lexical,
        query=query,
        threshold=threshold,
        alone=None if fusion else mode,
    )
