"""The one runner: hints -> route -> embed -> L1 queries -> rank -> assess, for any Pipeline, at given LookupOptions.
The lookup, eval configurations, the filter comparison, replay and the sweep all run through it, so they measure
exactly the tool's path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch, L0Hints
from retrieval.core.l1_search import L1Outcome, search_l1
from retrieval.core.pipeline import L1Query, Pipeline
from retrieval.core.protocols import LookupServices
from retrieval.core.ranking import CardQuery, FusionWeights, ResultItem, ranked
from retrieval.core.relevance import Relevance, judge
from retrieval.core.routing import category_filter
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import L1Error
from retrieval.types.modes import L1Status, Layer, LookupMode, SearchMode
from retrieval.types.options import LookupOptions

ROUTE = "route"  # RunOptions.category: let the pipeline's routing decide


def candidate_depth(options: LookupOptions) -> int:
    """Candidates each L1 query returns for the fusion: at least as many as are shown."""
    return max(options.top_k, options.candidate_depth)


def weights_of(options: LookupOptions) -> FusionWeights:
    return FusionWeights(
        vector=options.vector_weight,
        lexical=options.lexical_weight,
        l0=options.l0_weight,
        named=options.name_weight,
        missing=options.missing_score,
    )


def lookup_pipeline(options: LookupOptions, *, name: str = "lookup") -> Pipeline:
    """The lookup's L1 queries: the vector (or hybrid) query grouped by entry, and in fusion the BM25F query beside it."""
    depth = candidate_depth(options)
    mode = LookupMode(options.search_mode)
    kind = SearchMode.HYBRID if mode is LookupMode.HYBRID else SearchMode.NEAR_VECTOR
    main = L1Query(kind, depth, options.hybrid_alpha, grouped=True)
    if mode is LookupMode.FUSION:
        return Pipeline(name, (main, L1Query(SearchMode.BM25, depth, with_vector=False)), fusion=True)
    return Pipeline(name, (main,), fusion=True)


def single_query(name: str, mode: SearchMode, options: LookupOptions, *, routed: bool, depth: int | None = None) -> Pipeline:
    """One Weaviate query alone, top_k deep unless told, fetching similarities whatever its kind."""
    return Pipeline(name, (L1Query(mode, options.top_k if depth is None else depth, options.hybrid_alpha),), routed=routed)


def route(hints: L0Hints, pipeline: Pipeline) -> str | None:
    """The L1 filter of this pipeline for these hints (None: unfiltered)."""
    return category_filter(hints.domains) if pipeline.routed else None


@dataclass(frozen=True)
class RunOptions:
    """How a run departs from its pipeline's plain path: `category` ROUTE (the routing's) or the filter to search
    under (None: unfiltered); `rank_l0`: L0's matches take part in a fusion ranking; `k`: results kept (top_k)."""

    category: str | None = ROUTE
    rank_l0: bool = True
    k: int | None = None


@dataclass(frozen=True)
class PipelineRun:
    """One run of a pipeline on one searched text: its hints, what L1 did, the ranking, its assessment, the query
    vector (None when L1 did not run) and the time of each stage."""

    searched: str
    pipeline: Pipeline
    hints: L0Hints
    l1: L1Outcome
    results: tuple[ResultItem, ...]
    relevance: Relevance
    vector: Any = field(default=None, compare=False, repr=False)
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def layer(self) -> Layer:
        """The layers that gave the ranking: L0 when it matched and takes part, L1 when it answered."""
        l0_ranks = self.pipeline.fusion or not self.pipeline.l1
        return Layer.of(l0_ranks and self.hints.has_match, self.l1.status is L1Status.OK)


def run_lookup(searched: str, services: LookupServices, options: LookupOptions) -> PipelineRun:
    """The lookup's own pipeline at these options (top_k results)."""
    pipeline = lookup_pipeline(options)
    return run_pipeline(searched, pipeline, services, options)


def run_pipeline(
    searched: str, pipeline: Pipeline, services: LookupServices, options: LookupOptions, run: RunOptions = RunOptions()
) -> PipelineRun:
    """The whole sequence for `searched` (search_text of the query), each stage once: L0, the route, the L1 queries,
    the ranking, the claim. Never raises for an L1 fault: that is the L1Outcome's status and error."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hints = services.l0.match(searched)
    timings["l0"] = (time.perf_counter() - t0) * 1000
    category = route(hints, pipeline) if run.category == ROUTE else run.category
    weights, k = weights_of(options), options.top_k if run.k is None else run.k
    l1, vector = _run_l1(searched, category, pipeline, services, options, timings)
    fill = None
    if pipeline.fusion and services.store is not None and vector is not None:
        fill = CardQuery(services.store, vector, options.l1_timeout_s)
    t0 = time.perf_counter()
    matches = hints.matches if run.rank_l0 else ()
    mode = _mode(pipeline)
    results = ranked(matches, l1.found, fusion=pipeline.fusion, mode=mode, weights=weights, limit=pipeline.limit, k=k, cards=fill)
    relevance = judge(
        results,
        l1.found,
        mode=mode,
        fusion=pipeline.fusion,
        status=l1.status,
        embedding_model=options.embedding_model,
        norms=services.norms,
        threshold=options.support_threshold,
        query=searched,
    )
    cards_ms = sum(fill.spent_ms) if fill is not None else 0.0  # the cards query is L1's time, the rest the fusion's
    timings["fuse"] = (time.perf_counter() - t0) * 1000 - cards_ms
    if fill is not None:
        timings["l1"] += cards_ms
    timings["total"] = (time.perf_counter() - started) * 1000
    return PipelineRun(searched, pipeline, hints, l1, results, relevance, vector, timings)


def _mode(pipeline: Pipeline) -> SearchMode | None:
    """The kind of a pipeline's first L1 query (None: L0 alone)."""
    return pipeline.queries[0].mode if pipeline.queries else None


def _run_l1(
    searched: str, category: str | None, pipeline: Pipeline, services: LookupServices, options: LookupOptions, timings: dict
) -> tuple[L1Outcome, Any]:
    """What L1 did, and the query vector (None when L1 did not run)."""
    mode = options.search_mode if pipeline.fusion else (pipeline.queries[0].mode if pipeline.queries else options.search_mode)
    if not pipeline.l1 or not options.l1_enabled:
        return L1Outcome(L1Status.DISABLED, category, mode=mode), None
    if services.store is None or services.embedder is None:
        why = services.l1_unavailable or "L1 is not connected"
        return L1Outcome(L1Status.UNAVAILABLE, category, error=why, mode=mode), None
    t0 = time.perf_counter()
    vector = services.embedder.embed_query(searched)
    timings["embed"] = (time.perf_counter() - t0) * 1000
    entries = services.l0.entry_count(category)
    t0 = time.perf_counter()
    try:
        found = search_l1(
            services.store,
            pipeline.queries,
            text=searched,
            vector=vector,
            category=category,
            timeout_s=options.l1_timeout_s,
            entries=entries,
        )
    except L1Error as exc:
        timings["l1"] = (time.perf_counter() - t0) * 1000
        status = L1Status.UNAVAILABLE if exc.unavailable else L1Status.FAILED
        return L1Outcome(status, category, error=str(exc), mode=mode), None
    timings["l1"] = (time.perf_counter() - t0) * 1000
    status = L1Status.OK if any(found) else L1Status.EMPTY
    return L1Outcome(status, category, found, mode=mode), vector


def rank_and_assess(
    l0: Sequence[EntryMatch],
    found: Sequence[Sequence[Candidate]],
    pipeline: Pipeline,
    options: LookupOptions,
    searched: str,
    status: L1Status,
    *,
    k: int,
    fill: Callable[[Sequence[ResultItem]], Sequence[ResultItem]] | None = None,
    norms: SupportNorms | None = None,
) -> tuple[tuple[ResultItem, ...], Relevance]:
    """The ranking and the claim of run_pipeline on candidates fetched already (the sweep, the calibration): `fill`
    gives BM25F-only results their similarities; `norms` are the knowledge base's baselines (None: the reference)."""
    mode = _mode(pipeline)
    results = ranked(l0, found, fusion=pipeline.fusion, mode=mode, weights=weights_of(options), limit=pipeline.limit, k=k)
    if fill is not None and pipeline.fusion and pipeline.l1:
        results = tuple(fill(results))
    relevance = judge(
        results,
        found,
        mode=mode,
        fusion=pipeline.fusion,
        status=status,
        embedding_model=options.embedding_model,
        norms=norms,
        threshold=options.support_threshold,
        query=searched,
    )
    return results, relevance
