"""Filtered against unfiltered L1: for one query, and per case over an eval set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import Settings
from .eval_sets import EvalSet
from .evaluation import DEPTH
from .lookup import LookupServices
from .routing import category_filter, describe_routing
from .routing_metrics import filter_verdict
from .weaviate_store import Candidate


@dataclass(frozen=True)
class FilterComparison:
    query: str
    l0_domains: tuple[str, ...]
    category: str | None  # None: the filter does not apply (zero or several L0 domains)
    routing: str
    filtered: tuple[Candidate, ...]
    unfiltered: tuple[Candidate, ...]

    @property
    def overlap(self) -> list[str]:
        f = {c.entry_id for c in self.filtered}
        return [c.entry_id for c in self.unfiltered if c.entry_id in f]

    @property
    def removed(self) -> list[str]:
        """In the unfiltered top-k, kept out by the filter."""
        f = {c.entry_id for c in self.filtered}
        return [c.entry_id for c in self.unfiltered if c.entry_id not in f]

    @property
    def let_in(self) -> list[str]:
        """In the filtered top-k, not in the unfiltered one (the filter made room for them)."""
        u = {c.entry_id for c in self.unfiltered}
        return [c.entry_id for c in self.filtered if c.entry_id not in u]

    def rank_shifts(self) -> list[dict[str, Any]]:
        """Per entry in either list: its rank with and without the filter (None when absent)."""
        fr = {c.entry_id: i + 1 for i, c in enumerate(self.filtered)}
        ur = {c.entry_id: i + 1 for i, c in enumerate(self.unfiltered)}
        dist = {c.entry_id: c.distance for c in self.unfiltered} | {c.entry_id: c.distance for c in self.filtered}
        ids = list(dict.fromkeys([c.entry_id for c in self.unfiltered] + [c.entry_id for c in self.filtered]))
        return [{"entry_id": i, "rank_unfiltered": ur.get(i), "rank_filtered": fr.get(i), "distance": dist.get(i)} for i in ids]


def compare_filter(query: str, services: LookupServices, settings: Settings) -> FilterComparison:
    """Run L1 twice for one query: with the L0-derived filter (when it applies) and without any."""
    hints = services.l0.match(query)
    category = category_filter(hints.domains)
    vector = services.embedder.embed_query(query)
    mode = "hybrid" if settings.search_mode == "hybrid" else "near_vector"  # the vector query of the lookup's mode
    kw = dict(k=settings.top_k, mode=mode, query_text=query, alpha=settings.hybrid_alpha)
    unfiltered = services.store.search(vector, **kw)
    filtered = services.store.search(vector, category=category, **kw) if category else unfiltered
    return FilterComparison(query, hints.domains, category, describe_routing(hints.domains), tuple(filtered), tuple(unfiltered))


def excluded_by_filter(
    query: str, category: str | None, services: LookupServices, settings: Settings
) -> list[tuple[int, Candidate]]:
    """The best unfiltered L1 hits the L0 filter kept out (their domain is not `category`), each with its rank
    in the unfiltered top-k. [] when no filter applied or L1 is not there."""
    if category is None or services.store is None or services.embedder is None:
        return []
    vector = services.embedder.embed_query(query)  # cached by text: the lookup embedded it already
    mode = "hybrid" if settings.search_mode == "hybrid" else "near_vector"
    found = services.store.search(
        vector, k=settings.top_k, mode=mode, query_text=query, alpha=settings.hybrid_alpha, timeout_s=settings.l1_timeout_s
    )
    return [(rank, c) for rank, c in enumerate(found, 1) if c.domain != category]


def reciprocal_rank(ranking: list[str], expected: dict[str, int]) -> float:
    for i, entry_id in enumerate(ranking):
        if expected.get(entry_id, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(frozen=True)
class CaseFilterDelta:
    case_id: str
    query: str
    expected_domain: str | None
    category: str | None
    rr_unfiltered: float
    rr_filtered: float

    @property
    def verdict(self) -> str:
        return filter_verdict(self.category is not None, self.rr_unfiltered, self.rr_filtered)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "query": self.query,
            "expected_domain": self.expected_domain,
            "category": self.category,
            "rr_unfiltered": self.rr_unfiltered,
            "rr_filtered": self.rr_filtered,
            "delta_rr": self.rr_filtered - self.rr_unfiltered,
            "verdict": self.verdict,
        }


def compare_filter_on_set(
    eval_set: EvalSet, services: LookupServices, settings: Settings, progress: Callable[[int, int], None] | None = None
) -> list[CaseFilterDelta]:
    """The per-case change in reciprocal rank that the L0 filter causes (answerable cases only), over the
    top DEPTH (10) like the eval's mrr@10, so both pages count the same cases as hurt."""
    settings = settings.with_(top_k=max(DEPTH, settings.top_k))
    out = []
    cases = [c for c in eval_set.cases if c.answerable]
    for i, case in enumerate(cases):
        cmp = compare_filter(case.query, services, settings)
        out.append(
            CaseFilterDelta(
                case.id,
                case.query,
                case.domain,
                cmp.category,
                reciprocal_rank([c.entry_id for c in cmp.unfiltered], case.expected),
                reciprocal_rank([c.entry_id for c in cmp.filtered], case.expected),
            )
        )
        if progress:
            progress(i + 1, len(cases))
    return out
