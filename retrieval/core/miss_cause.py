"""Why an expected entry is not first: one cause per miss, read off what a run already holds (its hints, what L1
returned, its ranking), so that an eval run classifies every miss without another query, and the explanation of one
entry (retrieval.core.explain) says the same."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from retrieval.core.fusion_parts import FusionInputs, SignalPart
from retrieval.core.text import content_tokens

if TYPE_CHECKING:
    from retrieval.core.corpus import Entry
    from retrieval.core.hints import L0Hints
    from retrieval.core.l1_search import L1Outcome
    from retrieval.core.ranking import FusionWeights, ResultItem


class MissCause(StrEnum):
    """The first stage that put an expected entry below the top (or, for a case with no answer, that one was claimed)."""

    NOT_IN_KB = "not_in_kb"
    FILTER = "kept_out_by_filter"
    NEAR_DUPLICATE = "near_duplicate"
    PAST_DEPTH = "past_depth"
    FUSION = "lost_in_fusion"
    L1_DOWN = "l1_unavailable"
    ANSWERED_UNANSWERABLE = "answered_unanswerable"

    @property
    def label(self) -> str:
        return CAUSE_LABELS[self]


CAUSE_LABELS = {
    MissCause.NOT_IN_KB: "expected id not in the knowledge base",
    MissCause.FILTER: "kept out by the filter",
    MissCause.NEAR_DUPLICATE: "below a near-duplicate of itself",
    MissCause.PAST_DEPTH: "past every list's depth",
    MissCause.FUSION: "in the lists, lost in the fusion",
    MissCause.L1_DOWN: "L1 did not answer",
    MissCause.ANSWERED_UNANSWERABLE: "no answer in the knowledge base, support claimed",
}
# The order the causes are checked in, and shown in: the first that holds is the cause.
CAUSES = tuple(CAUSE_LABELS)
SIGNAL_LABELS = {"vector": "vector", "bm25": "BM25F", "l0": "L0", "named": "named in full"}
NEAR_DUPLICATE_JACCARD = 0.6  # word 3-shingles shared by two entries' texts, over those of either


@dataclass(frozen=True)
class Miss:
    """One miss and its cause: the expected entry it is about (None when none is in the knowledge base), its rank in the
    run (None: not ranked), the signal that lost it in the fusion, the entry ranked first, and one sentence with numbers."""

    cause: MissCause
    entry_id: str | None
    rank: int | None
    signal: str | None = None
    top: str | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": str(self.cause),
            "label": self.cause.label,
            "entry_id": self.entry_id,
            "rank": self.rank,
            "signal": self.signal,
            "top": self.top,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Miss:
        return cls(
            MissCause(data["cause"]),
            data.get("entry_id"),
            data.get("rank"),
            data.get("signal"),
            data.get("top"),
            str(data.get("detail") or ""),
        )


@functools.lru_cache(maxsize=4096)
def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = content_tokens(text)
    return frozenset(tuple(words[i : i + 3]) for i in range(max(len(words) - 2, 1)))


def near_duplicates(a: Entry, b: Entry) -> bool:
    """Two entries that say nearly the same: the same title, or NEAR_DUPLICATE_JACCARD of their texts' word 3-shingles."""
    if a.entry_id == b.entry_id:
        return False
    if a.title.strip().lower() == b.title.strip().lower():
        return True
    sa, sb = _shingles(a.text), _shingles(b.text)
    return bool(sa and sb) and len(sa & sb) / len(sa | sb) >= NEAR_DUPLICATE_JACCARD


@dataclass(frozen=True)
class RunView:
    """What one run of a pipeline holds, as a miss is classified from it: its hints, what L1 did, its ranking (as deep as
    it was kept), whether it has L1 queries and fuses, its fusion weights and list depth."""

    hints: L0Hints
    l1: L1Outcome
    results: Sequence[ResultItem]
    has_l1: bool
    fusion: bool
    weights: FusionWeights
    limit: int | None

    def inputs(self) -> FusionInputs:
        return FusionInputs(self.hints.matches, self.l1.candidates, self.l1.lexical, self.weights, self.limit)

    def rank(self, entry_id: str) -> int | None:
        return next((i + 1 for i, r in enumerate(self.results) if r.entry_id == entry_id), None)

    def lists_holding(self, entry_id: str) -> tuple[str, ...]:
        """The lists of this run that returned the entry: the L1 lists when L1 ran, else L0's matches."""
        if self.has_l1 and self.l1.status.ran:
            lists = {"vector": self.l1.candidates, "bm25": self.l1.lexical}
            if not self.fusion:
                lists = {self.single_signal: self.l1.candidates}
            return tuple(name for name, found in lists.items() if any(c.entry_id == entry_id for c in found))
        return ("l0",) if any(m.entry_id == entry_id for m in self.hints.matches) else ()

    @property
    def single_signal(self) -> str:
        return "bm25" if str(self.l1.mode) == "bm25" else "vector"


def _target(expected: Mapping[str, int], view: RunView, entries: Mapping[str, Entry]) -> str | None:
    """The expected entry a miss is about: the best-ranked one, else one that a list returned, else the highest graded."""
    known = [e for e, g in sorted(expected.items(), key=lambda kv: -kv[1]) if g > 0 and e in entries]
    if not known:
        return None
    ranked = [(view.rank(e), e) for e in known if view.rank(e) is not None]
    if ranked:
        return min(ranked)[1]
    return next((e for e in known if view.lists_holding(e)), known[0])


def classify(expected: Mapping[str, int], view: RunView, entries: Mapping[str, Entry], *, claimed: bool = False) -> Miss | None:
    """The cause of a case's miss in this run, or None when it is no miss (an expected entry is first, or a case with no
    answer was not answered with support). `claimed`: the run claimed semantic support for its top result."""
    top = view.results[0].entry_id if view.results else None
    if not any(g > 0 for g in expected.values()):
        if claimed and top is not None:
            return Miss(MissCause.ANSWERED_UNANSWERABLE, None, None, top=top, detail=f"support claimed for {top}")
        return None
    if top is not None and expected.get(top, 0) > 0:
        return None
    target = _target(expected, view, entries)
    if target is None:
        ids = ", ".join(e for e, g in expected.items() if g > 0)
        return Miss(MissCause.NOT_IN_KB, None, None, top=top, detail=f"{ids}: not in the knowledge base")
    return cause_of(target, view, entries)


def cause_of(entry_id: str, view: RunView, entries: Mapping[str, Entry]) -> Miss | None:
    """Why this entry (in the knowledge base) is not first in this run; None when it is."""
    rank, top = view.rank(entry_id), (view.results[0].entry_id if view.results else None)
    if rank == 1:
        return None
    entry = entries[entry_id]
    category = view.l1.applied_filter if view.has_l1 else None  # the filter L1 searched under, not one it was never given
    if category is not None and entry.domain.strip() != category:
        return Miss(
            MissCause.FILTER,
            entry_id,
            rank,
            top=top,
            detail=f"kept out by the filter: L0 chose {category}, the entry is in {entry.domain or '(no domain)'}",
        )
    if view.has_l1 and view.l1.status.fault:  # failed or unavailable: L1 did not answer
        return Miss(MissCause.L1_DOWN, entry_id, rank, top=top, detail=f"L1 {view.l1.status}: {view.l1.error or 'no answer'}")
    if top is not None and top in entries and near_duplicates(entries[top], entry):
        return Miss(
            MissCause.NEAR_DUPLICATE, entry_id, rank, top=top, detail=f"below {top}, a near-duplicate of it (same title or text)"
        )
    holding = view.lists_holding(entry_id)
    if not holding:
        depth = f"depth {view.limit}" if view.limit else "its matches"
        which = "the vector and BM25F lists" if view.fusion and view.has_l1 else "its list"
        return Miss(MissCause.PAST_DEPTH, entry_id, rank, top=top, detail=f"past the depth of {which} ({depth}): in none of them")
    signal, detail = _lost_by(entry_id, top, view, holding)
    return Miss(MissCause.FUSION, entry_id, rank, signal=signal, top=top, detail=detail)


def _lost_by(entry_id: str, top: str | None, view: RunView, holding: tuple[str, ...]) -> tuple[str, str]:
    """The signal whose weighted part put the entry furthest below the top, and the sentence that says so."""
    at = f"rank {view.rank(entry_id)}" if view.rank(entry_id) else "not ranked"
    if not view.fusion or not view.has_l1 or top is None:
        signal = holding[0]
        return signal, f"in the {SIGNAL_LABELS[signal]} list, ranked below {top} ({at})"
    inputs = view.inputs()
    mine, theirs = inputs.parts(entry_id), inputs.parts(top)
    gaps = {t.signal: t.value - m.value for m, t in zip(mine, theirs, strict=True) if t.weight > 0}
    named = {r.entry_id: r.named for r in view.results}
    if view.weights.named > 0 and named.get(top) and not named.get(entry_id):
        gaps["named"] = view.weights.named
    signal = max(gaps, key=lambda s: gaps[s]) if gaps else holding[0]
    if signal == "named":
        return signal, f"lost in the fusion ({at}): {top} is named in full by the query (+{view.weights.named:g}), it is not"
    m, t = _part(mine, signal), _part(theirs, signal)
    return signal, (
        f"lost in the fusion ({at}): {SIGNAL_LABELS[signal]} {m.scaled:.2f}×{m.weight:g}{_how(m)} against the top's "
        f"{t.scaled:.2f}×{t.weight:g}{_how(t)}"
    )


def _part(parts: Sequence[SignalPart], signal: str) -> SignalPart:
    return next(p for p in parts if p.signal == signal)


def _how(part: SignalPart) -> str:
    return "" if part.counted == "own" else " (its list's bound)" if part.counted == "bound" else " (not in its list)"
