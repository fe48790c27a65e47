"""What each signal counts for one entry in the lookup's fusion: the one place the fused score is made of its parts, so
that the ranking (ranking.fuse) and the explanation of any entry (retrieval.core.explain) read the same numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch
from retrieval.types.modes import MissingScore


@dataclass(frozen=True)
class FusionWeights:
    """How much each signal counts once scaled to its best candidate of the query (1.0); `named` is added for an entry
    the query names in full (hints.named_keys)."""

    vector: float = 1.0
    lexical: float = 1.0
    l0: float = 0.0
    named: float = 0.0
    # What an entry an L1 list did not return counts for that signal: the list's last scaled score when the list came
    # back full (the entry scores at most that), for the BM25F list ("bm25_last") or both ("last"); else 0 ("zero").
    missing: MissingScore = MissingScore.ZERO


SIGNALS = ("vector", "bm25", "l0")
L1_SIGNALS = ("vector", "bm25")


@dataclass(frozen=True)
class SignalPart:
    """One signal's part of an entry's fused score: its rank and own score in that signal's list (None: not in it),
    the scaled score counted (its own over the query's best, the list's bound, or 0) and the signal's weight."""

    signal: str
    weight: float
    rank: int | None
    raw: float | None
    scaled: float
    counted: str  # "own", "bound" (past a full list's depth: its last scaled score) or "zero"

    @property
    def value(self) -> float:
        """What it adds to the fused score."""
        return self.weight * self.scaled

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "weight": self.weight,
            "rank": self.rank,
            "raw": None if self.raw is None else round(self.raw, 5),
            "scaled": round(self.scaled, 5),
            "counted": self.counted,
            "value": round(self.value, 5),
        }


def scaled_scores(scores: dict[str, float]) -> dict[str, float]:
    """Each score over the query's best one: 1.0 for the best, 0 for nothing (negatives clip to 0)."""
    best = max(scores.values(), default=0.0)
    return {e: max(v, 0.0) / best for e, v in scores.items()} if best > 0 else {e: 0.0 for e in scores}


def list_bound(found: Sequence[Candidate], limit: int | None, bounded: bool) -> float:
    """The scaled score counted for an entry an L1 list did not return: when `bounded` and the list is full (`limit`
    returned), the last one's scaled score, which bounds every entry cut off; otherwise 0 (the list holds all it found)."""
    if not bounded or limit is None or not found or len(found) < limit:
        return 0.0
    best = max(c.score for c in found)
    return max(min(c.score for c in found), 0.0) / best if best > 0 else 0.0


class FusionInputs:
    """The fusion's view of one query's lists: each signal scaled to its best, ranked, weighted, and what an entry a
    list did not return counts for it. Built once per ranking; `parts` and `score` read it for any entry id."""

    def __init__(
        self,
        l0: Sequence[EntryMatch],
        vector: Sequence[Candidate],
        lexical: Sequence[Candidate],
        weights: FusionWeights,
        limit: int | None,
    ) -> None:
        self.weights = weights
        best_l0 = max((m.score for m in l0), default=0.0) or 1.0
        lists = {"vector": list(vector), "bm25": list(lexical)}
        self.raw = {name: {c.entry_id: c.score for c in found} for name, found in lists.items()}
        self.raw["l0"] = {m.entry_id: m.score for m in l0}
        self.scaled = {name: scaled_scores(self.raw[name]) for name in L1_SIGNALS}
        self.scaled["l0"] = {m.entry_id: m.score / best_l0 for m in l0}
        self.weight = {"vector": weights.vector, "bm25": weights.lexical, "l0": weights.l0}
        self.ranks = {name: {c.entry_id: i + 1 for i, c in enumerate(found)} for name, found in lists.items()}
        self.ranks["l0"] = {m.entry_id: i + 1 for i, m in enumerate(l0)}
        missing = MissingScore(weights.missing)
        self.fill = {n: list_bound(lists[n], limit, missing.bounds(n)) for n in L1_SIGNALS} | {"l0": 0.0}

    def parts(self, entry_id: str) -> tuple[SignalPart, ...]:
        """Each signal's part of this entry's fused score, in SIGNALS order."""
        out = []
        for name in SIGNALS:
            own = self.scaled[name].get(entry_id)
            counted = "own" if own is not None else "bound" if self.fill[name] > 0 else "zero"
            out.append(
                SignalPart(
                    name,
                    self.weight[name],
                    self.ranks[name].get(entry_id),
                    self.raw[name].get(entry_id),
                    own if own is not None else self.fill[name],
                    counted,
                )
            )
        return tuple(out)

    def score(self, entry_id: str, named: bool) -> float:
        """The entry's fused score as an L1-found entry: its parts summed, plus the weight of being named in full."""
        return sum(p.value for p in self.parts(entry_id)) + (self.weights.named if named else 0.0)

    def bounded(self, entry_id: str) -> tuple[str, ...]:
        """The L1 signals that counted their list's bound for this entry (it was past a full list's depth)."""
        return tuple(n for n in L1_SIGNALS if self.fill[n] > 0 and entry_id not in self.scaled[n] and self.weight[n] > 0)
