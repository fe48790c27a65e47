"""Evaluation's configurations: each a named pipeline of retrievers (pipeline.py), run on one case by the one runner
(retrieval.core.runner) the lookup runs: `lookup` is lookup_knowledge itself, the others its pipeline with options
(no L1, one query alone, with or without the L0 filter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval.core.explain import run_view
from retrieval.core.lookup import lookup_knowledge, search_text
from retrieval.core.miss_cause import RunView, classify
from retrieval.core.pipeline import Pipeline
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import candidate_depth, lookup_pipeline, run_pipeline, single_query, weights_of
from retrieval.errors import EvalSetError
from retrieval.evals.cases import RunFigures
from retrieval.types.modes import SearchMode
from retrieval.types.options import LookupOptions

# l1_*: the vector (near_vector) query alone; bm25: Weaviate's BM25F with the same L0 filter rule as the
# lookup; hybrid: Weaviate's hybrid query, unfiltered; lookup: the whole flow with the settings' mode.
CONFIGS = ("l0_only", "l1_unfiltered", "l1_filtered", "bm25", "hybrid", "lookup")
# The configurations that are one Weaviate query alone: its kind, and whether it takes the L0 filter.
SINGLE_QUERIES = {
    "l1_unfiltered": (SearchMode.NEAR_VECTOR, False),
    "l1_filtered": (SearchMode.NEAR_VECTOR, True),
    "bm25": (SearchMode.BM25, True),
    "hybrid": (SearchMode.HYBRID, False),
}
DEPTH = 10  # the ranks the metrics look at: every configuration ranks at least this deep


@dataclass(frozen=True)
class ConfigRun(RunFigures):
    """One case under one configuration, as it ran (RunFigures), with its stage timings."""

    case_id: str = ""
    config: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    fit: dict[str, Any] | None = None  # which support fit gave its estimate (Relevance.fit)

    def rank_of(self, expected: dict[str, int]) -> int | None:
        for i, entry_id in enumerate(self.ranking):
            if expected.get(entry_id, 0) > 0:
                return i + 1
        return None


def config_pipeline(config: str, options: LookupOptions) -> Pipeline:
    """The named list of retrievers of one configuration (see CONFIGS), top_k deep; `lookup` is the lookup's own."""
    if config == "lookup":
        return lookup_pipeline(options)
    if config == "l0_only":
        return Pipeline(config)
    if config not in SINGLE_QUERIES:
        raise EvalSetError(f"unknown configuration: {config} (known: {', '.join(CONFIGS)})")
    mode, routed = SINGLE_QUERIES[config]
    return single_query(config, mode, options, routed=routed)


def run_case(case, config: str, services: LookupServices, options: LookupOptions, run_tag: str) -> ConfigRun:
    """One case through one configuration: `lookup` is lookup_knowledge (records, fallback and all), every other the
    runner on that configuration's pipeline."""
    query = search_text(case.query)
    if config == "lookup":
        res = lookup_knowledge(query, services, options, session_tag=run_tag)
        top = res.results[0] if res.results else None
        view = RunView(res.l0, res.l1, res.results, True, True, weights_of(options), candidate_depth(options))
        return ConfigRun(
            ranking=tuple(r.entry_id for r in res.results),
            category=res.l1.category,
            layer=res.layer,
            l1_status=res.l1.status,
            fallback=res.fallback,
            semantic_support=res.relevance.semantic_support,
            support_score=top.l1_score if top else None,
            support_lexical=top.lexical_score if top else None,
            confidence=res.relevance.confidence,
            miss=classify(case.expected, view, services.l0.entries, claimed=res.relevance.semantic_support),
            case_id=case.id,
            config=config,
            timings_ms=dict(res.timings_ms),
            fit=res.relevance.fit,
        )
    pipeline = config_pipeline(config, options)
    if pipeline.l1 and (services.store is None or services.embedder is None):
        raise EvalSetError(f"configuration {config} needs L1, which is unavailable: {services.l1_unavailable or 'not connected'}")
    run = run_pipeline(query, pipeline, services, options)
    top = run.results[0] if run.results else None
    timings = {k: v for k, v in run.timings_ms.items() if k in ("l0", "embed", "l1")}
    return ConfigRun(
        ranking=tuple(r.entry_id for r in run.results),
        category=run.l1.category if pipeline.l1 else None,
        layer=run.layer,
        l1_status=run.l1.status,
        fallback=False,
        semantic_support=run.relevance.semantic_support,
        support_score=top.l1_score if top and pipeline.l1 else None,
        support_lexical=top.lexical_score if top and pipeline.l1 else None,
        confidence=run.relevance.confidence,
        miss=classify(case.expected, run_view(run, options), services.l0.entries, claimed=run.relevance.semantic_support),
        case_id=case.id,
        config=config,
        timings_ms=timings,
        fit=run.relevance.fit,
    )
