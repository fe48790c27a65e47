"""Filtered against unfiltered L1: for one query, and per case over an eval set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from retrieval.config import Settings
from retrieval.core.candidates import Candidate
from retrieval.core.lookup import search_text
from retrieval.core.pipeline import Pipeline
from retrieval.core.protocols import LookupServices
from retrieval.core.routing import describe_routing
from retrieval.core.runner import RunOptions, lookup_pipeline, route, run_pipeline, single_query
from retrieval.errors import QueryError
from retrieval.evals.evaluation import DEPTH
from retrieval.evals.routing_metrics import filter_verdict
from retrieval.evals.sets import EvalSet
from retrieval.types.modes import LookupMode, SearchMode
from retrieval.types.options import LookupOptions


@dataclass(frozen=True)
class FilterComparison:
    query: str
    l0_domains: tuple[str, ...]
    category: str | None  # None: the filter does not apply (zero or several L0 domains)
    routing: str
    filtered: tuple[Candidate, ...]
    unfiltered: tuple[Candidate, ...]
    kind: str = "near_vector"  # the L1 query compared: one of COMPARED_QUERIES

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


COMPARED_QUERIES = ("near_vector", "bm25", "hybrid", "fusion")
QUERY_MEANING = {
    "near_vector": "the vector query",
    "bm25": "the BM25F query over the entry cards",
    "hybrid": "Weaviate's hybrid query",
    "fusion": "the lookup's L1 ranking: the vector and BM25F queries fused with the lookup's weights",
}


def query_meaning(kind: str, settings: Settings) -> str:
    """What the compared `kind` is, named with the settings' own model and weights (never a model's name by hand)."""
    if kind in ("near_vector", "hybrid", "fusion"):
        return f"{QUERY_MEANING[kind]} ({settings.embedding_model})"
    return QUERY_MEANING[kind]


def comparison_pipeline(kind: str, options: LookupOptions) -> Pipeline:
    """The L1 queries of one compared `kind` (see COMPARED_QUERIES): one Weaviate query top_k deep, or for
    `fusion` the lookup's fusion pipeline."""
    if kind not in COMPARED_QUERIES:
        raise QueryError(f"L1 query '{kind}' is not one of {', '.join(COMPARED_QUERIES)}")
    if kind == LookupMode.FUSION:
        return lookup_pipeline(options.with_(search_mode=LookupMode.FUSION), name=kind)
    return single_query(kind, SearchMode(kind), options, routed=True)


def l1_ranking(query: str, category: str | None, services: LookupServices, options: LookupOptions, kind: str) -> list[Candidate]:
    """One L1 ranking of `kind` (see COMPARED_QUERIES), top_k long, under `category` (None: unfiltered): the runner
    on the compared pipeline with that filter. For `fusion` each candidate's score is its fused score and L0 is left
    out, as in L1 alone."""
    if services.store is None or services.embedder is None:
        raise QueryError("L1 is not connected: nothing to compare")
    run = run_pipeline(query, comparison_pipeline(kind, options), services, options, RunOptions(category, rank_l0=False))
    if run.l1.error:
        raise QueryError(f"the {kind} query failed: {run.l1.error}")
    if kind != LookupMode.FUSION:
        return list(run.l1.candidates)
    by_id = {c.entry_id: c for c in run.l1.lexical} | {c.entry_id: c for c in run.l1.candidates}
    return [replace(by_id[r.entry_id], score=r.score, similarity=r.l1_score) for r in run.results]


def compare_filter(query: str, services: LookupServices, settings: Settings, kind: str = "near_vector") -> FilterComparison:
    """Run one kind of L1 query twice: with the L0-derived filter (when it applies) and without any."""
    if services.embedder is None:
        raise QueryError("L1 is not connected: nothing to compare")
    query = search_text(query)
    options = settings.options()
    hints = services.l0.match(query)
    category = route(hints, comparison_pipeline(kind, options))
    unfiltered = l1_ranking(query, None, services, options, kind)
    filtered = l1_ranking(query, category, services, options, kind) if category else unfiltered
    return FilterComparison(
        query, hints.domains, category, describe_routing(hints.domains), tuple(filtered), tuple(unfiltered), kind
    )


def excluded_by_filter(
    query: str, category: str | None, services: LookupServices, settings: Settings
) -> list[tuple[int, Candidate]]:
    """The best unfiltered L1 hits the L0 filter kept out (their domain is not `category`), each with its rank
    in the unfiltered top-k. [] when no filter applied or L1 is not there."""
    if category is None or services.store is None or services.embedder is None:
        return []
    options = settings.options()
    main = lookup_pipeline(options).queries[0]  # the lookup's vector (or hybrid) query, top_k deep and unfiltered
    run = run_pipeline(query, single_query("kept out", main.mode, options, routed=False), services, options)
    return [(place, c) for place, c in enumerate(run.l1.candidates, 1) if c.domain != category]


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
    eval_set: EvalSet,
    services: LookupServices,
    settings: Settings,
    progress: Callable[[int, int], None] | None = None,
    kind: str = "near_vector",
) -> list[CaseFilterDelta]:
    """The per-case change in reciprocal rank that the L0 filter causes (answerable cases only), over the
    top DEPTH (10) like the eval's mrr@10, so both pages count the same cases as hurt."""
    settings = settings.with_(top_k=max(DEPTH, settings.top_k))
    out = []
    cases = [c for c in eval_set.cases if c.answerable]
    for i, case in enumerate(cases):
        cmp = compare_filter(case.query, services, settings, kind)
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
