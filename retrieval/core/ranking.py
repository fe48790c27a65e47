"""How L0 evidence and L1 candidates combine into the final ranking, and how relevance is assessed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch
from retrieval.core.support import SupportFeatures, SupportModel, features_of
from retrieval.core.support_norms import SupportNorms
from retrieval.types.modes import L1Status, MissingScore, SearchMode, Source


@dataclass(frozen=True)
class ResultItem:
    """One final result. `source` is L0, L1 or both; `ranks` says at which rank each signal (vector,
    bm25, l0) found it; `l1_score` is the cosine similarity of the query to the entry's best chunk; `named`:
    the query holds its whole title or file name (L0)."""

    entry_id: str
    title: str
    domain: str
    score: float
    source: Source
    l0_score: float | None = None
    l1_score: float | None = None
    lexical_score: float | None = None
    ranks: tuple[tuple[str, int], ...] = ()
    named: bool = False
    text: str = field(default="", compare=False, repr=False)  # its best L1 chunk's text (an excerpt); "" for L0 alone
    # L1 signals whose list did not return it, so that it counted that list's last score (a bound) instead of its own:
    # the list came back full and FusionWeights.missing is "last"
    bounded: tuple[str, ...] = ()

    @property
    def signals(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "score": round(self.score, 5),
            "source": str(self.source),
            "l0_score": None if self.l0_score is None else round(self.l0_score, 4),
            "l1_score": None if self.l1_score is None else round(self.l1_score, 5),
            "lexical_score": None if self.lexical_score is None else round(self.lexical_score, 4),
            "ranks": dict(self.ranks),
            "named": self.named,
            "bounded": list(self.bounded),
        }


@dataclass(frozen=True)
class FusionWeights:
    """How much each signal counts once it is scaled to its best candidate of the query (1.0); `named` is
    added for an entry the query names in full (its whole title or file name, see hints.named_keys).
    `missing`: what an entry an L1 list did not return counts for that signal: the scaled score of the list's last entry
    when the list came back full (the entry scores at most that) for the BM25F list ("bm25_last") or for both lists
    ("last"), else zero ("zero", and the vector list under "bm25_last")."""

    vector: float = 1.0
    lexical: float = 1.0
    l0: float = 0.0
    named: float = 0.0
    missing: MissingScore = MissingScore.ZERO


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


def _scaled(scores: dict[str, float]) -> dict[str, float]:
    """Each score over the query's best one: 1.0 for the best, 0 for nothing (negatives clip to 0)."""
    best = max(scores.values(), default=0.0)
    return {e: max(v, 0.0) / best for e, v in scores.items()} if best > 0 else {e: 0.0 for e in scores}


def list_bound(found: Sequence[Candidate], limit: int | None, bounded: bool) -> float:
    """The scaled score counted for an entry an L1 list did not return: when `bounded` and the list is full
    (`limit` entries asked, as many returned), the last one's scaled score, which bounds every entry the list cut
    off; otherwise 0 (a list shorter than its limit holds every entry it could find: a BM25F list every entry that
    shares a word with the query, a vector list every entry of the part searched)."""
    if not bounded or limit is None or not found or len(found) < limit:
        return 0.0
    best = max(c.score for c in found)
    return max(min(c.score for c in found), 0.0) / best if best > 0 else 0.0


def fuse(
    l0: Sequence[EntryMatch],
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate] = (),
    *,
    k: int,
    weights: FusionWeights = FusionWeights(),
    limit: int | None = None,
) -> list[ResultItem]:
    """Per-query scaled scores of each signal, weighted and summed: a signal whose raw scale is larger
    (BM25 against a cosine) counts no more for it. Entries only L0 found come after every entry that L1
    (vector or lexical) found; with no L1 candidates at all, the ranking is L0's own. An entry the query
    names in full gets `weights.named` more: an alert notification carries its alert's name. An entry an L1 list
    did not return counts `list_bound` for that signal (`limit`: the candidates each L1 query was asked for):
    missing from a list cut at its limit is not the same as scoring nothing.
    """
    best_l0 = max((m.score for m in l0), default=0.0) or 1.0
    l0_by_id = {m.entry_id: m for m in l0}
    if not vector and not lexical:
        items = [
            ResultItem(
                m.entry_id,
                m.title,
                m.domain,
                m.score / best_l0,
                Source.L0,
                l0_score=m.score,
                ranks=(("l0", i + 1),),
                named=m.named,
            )
            for i, m in enumerate(l0)
        ]
        return sorted(items, key=lambda r: (-r.score, r.entry_id))[:k]
    signals = {"vector": list(vector), "bm25": list(lexical)}
    scaled = {name: _scaled({c.entry_id: c.score for c in found}) for name, found in signals.items()}
    scaled["l0"] = {m.entry_id: m.score / best_l0 for m in l0}
    weight = {"vector": weights.vector, "bm25": weights.lexical, "l0": weights.l0}
    ranks = {name: {c.entry_id: i + 1 for i, c in enumerate(found)} for name, found in signals.items()}
    ranks["l0"] = {m.entry_id: i + 1 for i, m in enumerate(l0)}
    first: dict[str, Candidate] = {}
    for found in (vector, lexical):
        for c in found:
            first.setdefault(c.entry_id, c)
    sims = {c.entry_id: c.similarity for found in (lexical, vector) for c in found if c.similarity is not None}
    lex_scores = {c.entry_id: c.score for c in lexical}
    fill = {
        "vector": list_bound(vector, limit, MissingScore(weights.missing).bounds("vector")),
        "bm25": list_bound(lexical, limit, MissingScore(weights.missing).bounds("bm25")),
        "l0": 0.0,
    }
    items = []
    for entry_id, c in first.items():
        m = l0_by_id.get(entry_id)
        score = sum(weight[name] * scaled[name].get(entry_id, fill[name]) for name in weight)
        bounded = tuple(n for n in ("vector", "bm25") if fill[n] > 0 and entry_id not in scaled[n] and weight[n] > 0)
        named = m is not None and m.named
        score += weights.named if named else 0.0
        items.append(
            ResultItem(
                entry_id,
                c.title,
                c.domain,
                score,
                Source.BOTH if m else Source.L1,
                l0_score=m.score if m else None,
                l1_score=sims.get(entry_id),
                lexical_score=lex_scores.get(entry_id),
                ranks=tuple((name, ranks[name][entry_id]) for name in ("vector", "bm25", "l0") if entry_id in ranks[name]),
                named=named,
                text=c.snippet,
                bounded=bounded,
            )
        )
    floor = min(i.score for i in items)
    for i, m in enumerate(l0):
        if m.entry_id not in first:
            # Below every L1-supported result: L0 alone never outranks semantic evidence.
            items.append(
                ResultItem(
                    m.entry_id,
                    m.title,
                    m.domain,
                    floor * (m.score / best_l0) * 0.5,
                    Source.L0,
                    l0_score=m.score,
                    ranks=(("l0", i + 1),),
                    named=m.named,
                )
            )
    return sorted(items, key=lambda r: (-r.score, r.entry_id))[:k]


def listed(found: Sequence[Candidate], mode: SearchMode, *, k: int) -> list[ResultItem]:
    """One L1 query's candidates as results, in its own order (an eval configuration of that query alone): each
    with its search score, its similarity, and its rank in that list (bm25, or vector for near_vector and hybrid)."""
    signal = "bm25" if mode is SearchMode.BM25 else "vector"
    return [
        ResultItem(
            c.entry_id,
            c.title,
            c.domain,
            c.score,
            Source.L1,
            l1_score=c.similarity,
            lexical_score=c.score if mode is SearchMode.BM25 else None,
            ranks=((signal, i + 1),),
            text=c.snippet,
        )
        for i, c in enumerate(found[:k])
    ]


SIGNAL_NAMES = {"vector": "vector", "bm25": "BM25F", "l0": "L0"}


def explain(item: ResultItem, weights: FusionWeights) -> str:
    """One line on which signals placed a result where: each signal's rank, what its score sums, and what each L1
    list that did not return it counted instead (a bound, or nothing)."""
    found = ", ".join(f"{SIGNAL_NAMES[name]} #{rank}" for name, rank in item.ranks)
    if item.source == Source.L0:
        return f"{found} only: ranked by its L0 score, after every entry L1 found"
    weight = {"vector": weights.vector, "bm25": weights.lexical, "l0": weights.l0}
    counted = [f"{weight[name]:g}×{SIGNAL_NAMES[name]}" for name in item.signals if weight[name] > 0]
    counted += [f"{weight[name]:g}×{SIGNAL_NAMES[name]} bound" for name in item.bounded]
    ignored = [SIGNAL_NAMES[name] for name in item.signals if weight[name] <= 0]
    if item.named and weights.named > 0:
        counted.append(f"{weights.named:g} for being named in full")
    text = f"{found}; score = {' + '.join(counted) or '0'} (each scaled to this query's best)"
    missing = []
    for name in ("vector", "bm25"):
        if name in item.signals or weight[name] <= 0:
            continue
        if name in item.bounded:
            missing.append(f"not in the {SIGNAL_NAMES[name]} list, which was cut at its limit: counted at that list's last score")
        else:
            missing.append(f"not in the {SIGNAL_NAMES[name]} list: counted 0")
    text += "".join(f"; {m}" for m in missing)
    return text + (f"; {', '.join(ignored)} at weight 0, not counted" if ignored else "")


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
) -> Relevance:
    """Relevance of the top result: the support estimate (`support`, fitted for the embedding model, read against
    this knowledge base's `norms`) from the ranking and the candidates of both L1 queries, and the claim at
    `threshold` (default: the model's). An entry the query names in full is supported whatever the estimate: the
    user said which entry they meant."""
    if not results:
        return Relevance(False, "none", f"No L0 match and L1 {l1_status}: nothing found.")
    top = results[0]
    if top.l1_score is None and not (vector or lexical):
        return Relevance(False, "low", f"Keyword evidence only (L0); L1 {l1_status}, so no semantic support.")
    cut = support.cut(threshold)
    features = features_of(top.entry_id, top.l1_score, dict(top.ranks), [r.score for r in results], vector, lexical, query)
    chance = support.probability(features, norms)
    fit = fit_of(support, norms)
    l0 = "; L0 agrees" if top.source == Source.BOTH else ""
    sibling = norms.expected("similarity").at(features.query_length)
    evidence = evidence_text(features.similarity, features.similarity_margin, features.lexical_per_word, sibling)
    if top.named:
        return Relevance(
            True,
            "high",
            f"The query names this entry in full (its title or file name), so it is supported whatever the estimate "
            f"({percent(chance)}): {evidence}{l0}.",
            chance,
            cut,
            features,
            fit,
        )
    if chance >= cut:
        level = "high" if chance >= max(HIGH_CONFIDENCE, cut) else "medium"
        return Relevance(
            True,
            level,
            f"An estimated {percent(chance)} chance that it is right (support from {percent(cut)}): {evidence}{l0}.",
            chance,
            cut,
            features,
            fit,
        )
    return Relevance(
        False,
        "low",
        f"An estimated {percent(chance)} chance that it is right, below {percent(cut)}: {evidence}. A neighbour, not "
        f"semantic support: the corpus may not answer this{l0}.",
        chance,
        cut,
        features,
        fit,
    )
