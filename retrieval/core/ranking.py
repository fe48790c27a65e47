"""How L0 evidence and L1 candidates combine into the final ranking, and why each result is where it is."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from retrieval.core.candidates import Candidate
from retrieval.core.fusion_parts import FusionInputs, FusionWeights, list_bound  # noqa: F401  (read from here too)
from retrieval.core.hints import EntryMatch
from retrieval.core.search_request import SearchRequest
from retrieval.errors import L1Error
from retrieval.types.modes import SearchMode, Source

if TYPE_CHECKING:
    from retrieval.core.protocols import KnowledgeSearch


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


def fuse(
    l0: Sequence[EntryMatch],
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate] = (),
    *,
    k: int,
    weights: FusionWeights = FusionWeights(),
    limit: int | None = None,
) -> list[ResultItem]:
    """Per-query scaled scores of each signal, weighted and summed (so BM25's scale cannot outweigh a cosine), plus
    `weights.named` for an entry the query names; L0-only entries come after every L1 one. An entry missing from an L1
    list counts `list_bound` for it (`limit`: the candidates each L1 query asked for)."""
    best_l0 = max((m.score for m in l0), default=0.0) or 1.0
    if not vector and not lexical:
        return _top([_l0_item(m, i + 1, m.score / best_l0) for i, m in enumerate(l0)], k)
    items = _l1_items(l0, vector, lexical, weights, limit)
    found = {item.entry_id for item in items}
    floor = min(item.score for item in items)
    # below every L1-supported result: L0 alone never outranks semantic evidence
    items += [_l0_item(m, i + 1, floor * (m.score / best_l0) * 0.5) for i, m in enumerate(l0) if m.entry_id not in found]
    return _top(items, k)


def _top(items: list[ResultItem], k: int) -> list[ResultItem]:
    return sorted(items, key=lambda r: (-r.score, r.entry_id))[:k]


def _l0_item(m: EntryMatch, rank: int, score: float) -> ResultItem:
    """An entry only L0 found, at `score`."""
    return ResultItem(m.entry_id, m.title, m.domain, score, Source.L0, l0_score=m.score, ranks=(("l0", rank),), named=m.named)


def _l1_items(
    l0: Sequence[EntryMatch],
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    weights: FusionWeights,
    limit: int | None,
) -> list[ResultItem]:
    """Every entry an L1 list found, its score the weighted sum of its scaled signals (a list's bound where it is missing):
    FusionInputs, which the explanation of any entry reads too."""
    inputs = FusionInputs(l0, vector, lexical, weights, limit)
    first: dict[str, Candidate] = {}
    for found in (vector, lexical):
        for c in found:
            first.setdefault(c.entry_id, c)
    sims = {c.entry_id: c.similarity for found in (lexical, vector) for c in found if c.similarity is not None}
    lex_scores = {c.entry_id: c.score for c in lexical}
    l0_by_id = {m.entry_id: m for m in l0}
    items = []
    for entry_id, c in first.items():
        m = l0_by_id.get(entry_id)
        named = m is not None and m.named
        items.append(
            ResultItem(
                entry_id,
                c.title,
                c.domain,
                inputs.score(entry_id, named),
                Source.BOTH if m else Source.L1,
                l0_score=m.score if m else None,
                l1_score=sims.get(entry_id),
                lexical_score=lex_scores.get(entry_id),
                ranks=tuple((p.signal, p.rank) for p in inputs.parts(entry_id) if p.rank is not None),
                named=named,
                text=c.snippet,
                bounded=inputs.bounded(entry_id),
            )
        )
    return items


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


@dataclass(frozen=True)
class CardQuery:
    """Where the similarities of BM25F-only results come from: the store, the query vector and the time limit;
    `spent_ms` gathers the time the cards query took (it is L1's time, not the fusion's)."""

    store: KnowledgeSearch
    vector: Any
    timeout_s: float | None
    spent_ms: list[float] = field(default_factory=list, compare=False)


def with_card_similarities(results: Sequence[ResultItem], cards: CardQuery | None) -> tuple[ResultItem, ...]:
    """`results` with the query's similarity to each BM25F-only result's card: one query for those cards, none when
    there are none. When it fails they stay without one, so no support is claimed on their account."""
    missing = [r.entry_id for r in results if r.l1_score is None and r.lexical_score is not None]
    if not missing or cards is None or cards.vector is None:
        return tuple(results)
    started = time.perf_counter()
    try:
        found = cards.store.search(SearchRequest.cards(cards.vector, missing, timeout_s=cards.timeout_s))
    except L1Error:
        return tuple(results)
    finally:
        cards.spent_ms.append((time.perf_counter() - started) * 1000)
    sims = {c.entry_id: c.similarity for c in found}
    return tuple(replace(r, l1_score=sims[r.entry_id]) if sims.get(r.entry_id) is not None else r for r in results)


def ranked(
    l0: Sequence[EntryMatch],
    found: Sequence[Sequence[Candidate]],
    *,
    fusion: bool,
    mode: SearchMode | None,
    weights: FusionWeights,
    limit: int | None,
    k: int,
    cards: CardQuery | None = None,
) -> tuple[ResultItem, ...]:
    """The ranking of a pipeline's candidates: the fusion of L0 and the L1 lists (with the card similarities of
    BM25F-only results), L0's own ranking when there is no L1 (`mode` None), or one query's list as it came."""
    vector = tuple(found[0]) if found else ()
    if not fusion and mode is not None:
        return tuple(listed(vector, mode, k=k))
    lexical = tuple(found[1]) if len(found) > 1 else ()
    results = fuse(l0, vector, lexical, k=k, weights=weights, limit=limit)
    return with_card_similarities(results, cards)
