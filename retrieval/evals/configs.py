"""Evaluation's configurations: each a named pipeline of retrievers (pipeline.py), run on one case."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from retrieval.config import Settings
from retrieval.core.candidates import Candidate, L1Status
from retrieval.core.lookup import LookupServices, lookup_knowledge, search_text
from retrieval.core.pipeline import Pipeline, lookup_pipeline, route, search_l1, single_query
from retrieval.core.search_request import SearchMode
from retrieval.core.support import features_of, support_model
from retrieval.errors import EvalSetError

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
class ConfigRun:
    """One case under one configuration."""

    case_id: str
    config: str
    ranking: tuple[str, ...]
    category: str | None
    layer: str
    l1_status: str
    fallback: bool
    semantic_support: bool
    timings_ms: dict[str, float] = field(default_factory=dict)
    support_score: float | None = None  # cosine similarity of the query to the top result's best chunk
    support_lexical: float | None = None  # the top result's BM25F score (None: not a BM25F hit, or no BM25F query)
    confidence: float | None = None  # the support estimate: the chance that the top result is right

    def rank_of(self, expected: dict[str, int]) -> int | None:
        for i, entry_id in enumerate(self.ranking):
            if expected.get(entry_id, 0) > 0:
                return i + 1
        return None


def config_pipeline(config: str, settings: Settings) -> Pipeline:
    """The named list of retrievers of one configuration (see CONFIGS), top_k deep; `lookup` is the lookup's own."""
    if config == "lookup":
        return lookup_pipeline(settings)
    if config == "l0_only":
        return Pipeline(config)
    if config not in SINGLE_QUERIES:
        raise EvalSetError(f"unknown configuration: {config} (known: {', '.join(CONFIGS)})")
    mode, routed = SINGLE_QUERIES[config]
    return single_query(config, mode, settings, routed=routed)


def _single_support(found: Sequence[Candidate], mode: SearchMode, query: str, settings: Settings) -> float | None:
    """The support estimate of one query's top result, as the lookup's would be with that signal alone."""
    if not found:
        return None
    bm25 = mode is SearchMode.BM25
    features = features_of(
        found[0].entry_id,
        found[0].similarity,
        {"bm25" if bm25 else "vector": 1},
        [c.score for c in found],
        () if bm25 else found,
        found if bm25 else (),
        query,
    )
    return support_model(settings.embedding_model).probability(features)


def run_case(case, config: str, services: LookupServices, settings: Settings, run_tag: str) -> ConfigRun:
    query = search_text(case.query)
    if config == "lookup":
        res = lookup_knowledge(query, services, settings, session_tag=run_tag)
        return ConfigRun(
            case.id,
            config,
            tuple(r.entry_id for r in res.results),
            res.l1.category,
            res.layer,
            res.l1.status,
            res.fallback,
            res.relevance.semantic_support,
            dict(res.timings_ms),
            res.results[0].l1_score if res.results else None,
            res.results[0].lexical_score if res.results else None,
            res.relevance.confidence,
        )
    pipeline = config_pipeline(config, settings)
    t0 = time.perf_counter()
    hints = services.l0.match(query)
    timings = {"l0": (time.perf_counter() - t0) * 1000}
    if not pipeline.l1:
        ranking = tuple(m.entry_id for m in hints.matches[: settings.top_k])
        return ConfigRun(case.id, config, ranking, None, "L0" if ranking else "none", L1Status.DISABLED, False, False, timings)
    if services.store is None or services.embedder is None:
        raise EvalSetError(f"configuration {config} needs L1, which is unavailable: {services.l1_unavailable or 'not connected'}")
    category = route(hints, pipeline)
    t0 = time.perf_counter()
    vector = services.embedder.embed_query(query)
    timings["embed"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    (found,) = search_l1(services.store, pipeline.queries, text=query, vector=vector, category=category)
    timings["l1"] = (time.perf_counter() - t0) * 1000
    mode = pipeline.queries[0].mode
    confidence = _single_support(found, mode, query, settings)
    supported = confidence is not None and confidence >= support_model(settings.embedding_model).cut(settings.support_threshold)
    return ConfigRun(
        case.id,
        config,
        tuple(c.entry_id for c in found),
        category,
        "L1" if found else "none",
        L1Status.OK if found else L1Status.EMPTY,
        False,
        supported,
        timings,
        found[0].similarity if found else None,
        found[0].score if found and mode is SearchMode.BM25 else None,
        confidence,
    )
