"""How L0 evidence and L1 candidates combine into the final ranking, and how relevance is assessed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .hints import EntryMatch
from .weaviate_store import Candidate

HIGH_SIMILARITY = 0.55
# Below this cosine similarity the nearest entry is a neighbour, not support. Measured on the runbooks and
# sample eval sets: the median unanswerable query's best match is 0.38-0.44; 90 % of right answers are above 0.40.
MIN_SUPPORT_SIMILARITY = 0.40


@dataclass(frozen=True)
class ResultItem:
    """One final result. `source` is L0, L1 or both."""

    entry_id: str
    title: str
    domain: str
    score: float
    source: str
    l0_score: float | None = None
    l1_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "title": self.title, "domain": self.domain,
            "score": round(self.score, 5), "source": self.source,
            "l0_score": None if self.l0_score is None else round(self.l0_score, 4),
            "l1_score": None if self.l1_score is None else round(self.l1_score, 5),
        }


@dataclass(frozen=True)
class Relevance:
    semantic_support: bool
    level: str  # high | medium | low | none
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"semantic_support": self.semantic_support, "level": self.level, "reason": self.reason}


def fuse(l0: Sequence[EntryMatch], l1: Sequence[Candidate], *, k: int, l0_weight: float) -> list[ResultItem]:
    """L1 similarity plus a bounded L0 bonus (the L0 score relative to the best L0 match).

    With no L1 candidates, the ranking is L0's own. An L0 match that L1 did not return is kept
    after L1's candidates only when it has nothing from L1 to compete with.
    """
    best_l0 = max((m.score for m in l0), default=0.0) or 1.0
    l0_by_id = {m.entry_id: m for m in l0}
    if not l1:
        items = [ResultItem(m.entry_id, m.title, m.domain, m.score / best_l0, "L0", l0_score=m.score) for m in l0]
        return sorted(items, key=lambda r: (-r.score, r.entry_id))[:k]
    items = []
    for c in l1:
        m = l0_by_id.get(c.entry_id)
        bonus = l0_weight * (m.score / best_l0) if m else 0.0
        items.append(ResultItem(c.entry_id, c.title, c.domain, c.score + bonus, "both" if m else "L1",
                                l0_score=m.score if m else None, l1_score=c.score))
    l1_ids = {c.entry_id for c in l1}
    floor = min(i.score for i in items)
    for m in l0:
        if m.entry_id not in l1_ids:
            # Below every L1-supported result: L0 alone never outranks semantic evidence.
            items.append(ResultItem(m.entry_id, m.title, m.domain, floor * (m.score / best_l0) * 0.5, "L0", l0_score=m.score))
    return sorted(items, key=lambda r: (-r.score, r.entry_id))[:k]


def assess(results: Sequence[ResultItem], l1_status: str, *, min_support: float = MIN_SUPPORT_SIMILARITY) -> Relevance:
    """Relevance of the top result. Semantic support is claimed only when L1 returned that entry,
    close enough (similarity >= min_support)."""
    if not results:
        return Relevance(False, "none", f"no L0 match and L1 {l1_status}: nothing found")
    top = results[0]
    if top.l1_score is None:
        return Relevance(False, "low", f"keyword evidence only (L0); L1 {l1_status}, so no semantic support")
    sim = top.l1_score
    agree = "; L0 agrees" if top.source == "both" else ""
    if sim < min_support:
        return Relevance(False, "low", f"best L1 similarity {sim:.2f} is below {min_support:.2f}: a neighbour, "
                                       f"not semantic support; the corpus may not answer this{agree}")
    level = "high" if sim >= max(HIGH_SIMILARITY, min_support) else "medium"
    return Relevance(True, level, f"L1 similarity {sim:.2f} for the top result{agree}")
