"""The one pipeline runner: hints -> route -> embed -> L1 queries -> rank -> assess, for any Pipeline.

`run_pipeline` is what the lookup runs (lookup_knowledge adds the query checks and the record); every eval
configuration, the filter comparison and the sweep's signal collection run it too, with their own Pipeline or
options, so they measure exactly the tool's path. `rank_and_assess` is its ranking half, which the sweep and the
calibration call on candidates they fetched through the runner once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.config import Settings
from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch, L0Hints
from retrieval.core.pipeline import Pipeline, judge, limit_of, rank, route, search_l1, with_similarities
from retrieval.core.protocols import LookupServices
from retrieval.core.ranking import Relevance, ResultItem, fit_of, listed, percent
from retrieval.core.support import features_of, reference_norms, support_model
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import L1Error
from retrieval.types.modes import L1Status, Layer, LookupMode, SearchMode

ROUTE = "route"  # RunOptions.category: let the pipeline's routing decide


@dataclass(frozen=True)
class L1Outcome:
    """What L1 did: `found` holds each query's candidates in the pipeline's order; `candidates` are the first
    query's (the vector or hybrid query), `lexical` the BM25F query's of a fusion pipeline."""

    status: L1Status
    category: str | None  # the filter the routing chose (None: unfiltered); applied_filter: only when L1 ran
    found: tuple[tuple[Candidate, ...], ...] = ()
    error: str | None = None
    mode: LookupMode | SearchMode = LookupMode.NEAR_VECTOR

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return self.found[0] if self.found else ()

    @property
    def lexical(self) -> tuple[Candidate, ...]:
        return self.found[1] if len(self.found) > 1 else ()

    @property
    def applied_filter(self) -> str | None:
        """The category L1 searched under: None when it ran unfiltered or did not run at all."""
        return self.category if self.status.ran else None

    @property
    def signals(self) -> tuple[str, ...]:
        """The L1 signals that returned something: vector (or hybrid), bm25."""
        return tuple(name for name, found in (("vector", self.candidates), ("bm25", self.lexical)) if found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "filter": None if self.category is None else {"category": self.category},
            "candidates": [c.to_dict() for c in self.candidates],
            "lexical": [c.to_dict() for c in self.lexical],
            "error": self.error,
            "mode": str(self.mode),
        }


@dataclass(frozen=True)
class RunOptions:
    """How a run departs from its pipeline's plain path. `category`: ROUTE (the pipeline's routing), or the filter
    to search under (None: unfiltered); `rank_l0`: L0's matches take part in a fusion ranking (the filter comparison
    ranks L1 alone); `k`: results kept (default: the settings' top_k)."""

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
        """The layers that gave the ranking: L0 when it matched and takes part (a fusion or L0 alone), L1 when it answered."""
        l0_ranks = self.pipeline.fusion or not self.pipeline.l1
        return Layer.of(l0_ranks and self.hints.has_match, self.l1.status is L1Status.OK)


def run_pipeline(
    searched: str, pipeline: Pipeline, services: LookupServices, settings: Settings, options: RunOptions = RunOptions()
) -> PipelineRun:
    """The whole sequence for `searched` (what L0 and L1 search: lookup.search_text of the query). Never raises for
    an L1 fault: it is L1Outcome's status and error."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hints = services.l0.match(searched)
    timings["l0"] = (time.perf_counter() - t0) * 1000
    category = route(hints, pipeline) if options.category == ROUTE else options.category
    l1, vector = _run_l1(searched, category, pipeline, services, settings, timings)
    k = settings.top_k if options.k is None else options.k
    fill_ms = [0.0]
    fill = None
    if pipeline.fusion and services.store is not None and vector is not None:
        store = services.store

        def fill(results: Sequence[ResultItem]) -> tuple[ResultItem, ...]:
            t1 = time.perf_counter()
            out = with_similarities(results, store, vector, settings)
            fill_ms[0] += (time.perf_counter() - t1) * 1000
            return out

    t0 = time.perf_counter()
    matches = hints.matches if options.rank_l0 else ()
    results, relevance = rank_and_assess(
        matches, l1.found, pipeline, settings, searched, l1.status, k=k, fill=fill, norms=services.norms
    )
    # the cards query for BM25F-only results is L1's time, the rest of ranking and assessing the fusion's
    timings["fuse"] = (time.perf_counter() - t0) * 1000 - fill_ms[0]
    if fill is not None:
        timings["l1"] += fill_ms[0]
    timings["total"] = (time.perf_counter() - started) * 1000
    return PipelineRun(searched, pipeline, hints, l1, results, relevance, vector, timings)


def _run_l1(
    searched: str, category: str | None, pipeline: Pipeline, services: LookupServices, settings: Settings, timings: dict
) -> tuple[L1Outcome, Any]:
    """What L1 did, and the query vector (None when L1 did not run)."""
    mode = settings.search_mode if pipeline.fusion else (pipeline.queries[0].mode if pipeline.queries else settings.search_mode)
    if not pipeline.l1 or not settings.l1_enabled:
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
            timeout_s=settings.l1_timeout_s,
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
    settings: Settings,
    searched: str,
    status: L1Status,
    *,
    k: int,
    fill: Callable[[Sequence[ResultItem]], Sequence[ResultItem]] | None = None,
    norms: SupportNorms | None = None,
) -> tuple[tuple[ResultItem, ...], Relevance]:
    """The ranking of a pipeline's candidates and its relevance assessment. A fusion pipeline fuses L0 and its L1
    lists at the settings' weights (`fill`: the similarities of results only BM25F found, before the assessment);
    a single query keeps its own list; no query: L0's own ranking. The support estimate reads the knowledge base's
    `norms` (None: the model's reference baselines)."""
    vector = tuple(found[0]) if found else ()
    lexical = tuple(found[1]) if len(found) > 1 else ()
    if pipeline.fusion or not pipeline.l1:
        results = tuple(rank(l0, vector, lexical, settings, k=k, limit=limit_of(pipeline)))
        if fill is not None:
            results = tuple(fill(results))
        if not pipeline.l1:
            return results, Relevance(False, "low" if results else "none", "L0 alone: no semantic retrieval in this run.")
        return results, judge(results, status, vector, lexical, searched, settings, norms)
    mode = pipeline.queries[0].mode
    results = tuple(listed(vector, mode, k=k))
    return results, _single_support(results, vector, mode, searched, settings, norms)


def _single_support(
    results: Sequence[ResultItem],
    found: Sequence[Candidate],
    mode: SearchMode,
    searched: str,
    settings: Settings,
    norms: SupportNorms | None,
) -> Relevance:
    """The support estimate of one query's top result, as the lookup's would be with that signal alone."""
    if not results:
        return Relevance(False, "none", "No L1 candidates.")
    bm25 = mode is SearchMode.BM25
    top = found[0]
    features = features_of(
        top.entry_id,
        top.similarity,
        {"bm25" if bm25 else "vector": 1},
        [c.score for c in found],
        () if bm25 else found,
        found if bm25 else (),
        searched,
    )
    model = support_model(settings.embedding_model)
    baselines = norms or reference_norms(settings.embedding_model)
    chance = model.probability(features, baselines)
    cut = model.cut(settings.support_threshold)
    claimed = chance >= cut
    reason = f"The {mode} query alone: an estimated {percent(chance)} chance that its top result is right."
    return Relevance(claimed, "medium" if claimed else "low", reason, chance, cut, features, fit_of(model, baselines))
