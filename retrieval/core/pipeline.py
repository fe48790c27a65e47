"""The retrieval pipeline's parts: L0 -> route -> embed -> L1 queries -> fuse -> assess.

A `Pipeline` is a named list of retrievers (`L1Query`) over these steps; `retrieval.core.run.run_pipeline` runs one.
The lookup runs the one its settings name (`lookup_pipeline`); evaluation's configurations, the filter comparison
and the sweep run others through the same runner, so no caller builds a Weaviate query or a fusion by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval.config import Settings
from retrieval.core.candidates import Candidate
from retrieval.core.deadline import start
from retrieval.core.hints import EntryMatch, L0Hints
from retrieval.core.ranking import FusionWeights, Relevance, ResultItem, assess, fuse
from retrieval.core.routing import category_filter
from retrieval.core.search_request import SearchRequest
from retrieval.core.support import reference_norms, support_model
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import L1Error
from retrieval.types.modes import L1Status, LookupMode, SearchMode

if TYPE_CHECKING:
    from retrieval.core.protocols import KnowledgeSearch


def candidate_depth(settings: Settings) -> int:
    """Candidates each L1 query returns for the fusion (Settings.candidate_depth, chosen by leave-one-set-out
    cross-validation, docs/quality.md): at least as many as are shown (the two lists together hold up to twice
    that), and the same for a lookup and an eval run (top 10)."""
    return max(settings.top_k, settings.candidate_depth)


def weights_of(settings: Settings) -> FusionWeights:
    return FusionWeights(
        vector=settings.vector_weight,
        lexical=settings.lexical_weight,
        l0=settings.l0_weight,
        named=settings.name_weight,
        missing=settings.missing_score,
    )


@dataclass(frozen=True)
class L1Query:
    """One L1 retriever: a Weaviate query of `mode`, `depth` candidates deep.

    `with_vector`: False for a BM25F query that fetches no vectors (20 of them were a fifth of L1's time);
    its candidates then take the similarity the pipeline's first query found for the same entry, or none.
    `grouped`: a near_vector query that lets Weaviate group chunk hits by entry (the corpus's entry count
    under the filter is known to the lookup)."""

    mode: SearchMode
    depth: int
    alpha: float = 0.5
    with_vector: bool = True
    grouped: bool = False

    def request(
        self, text: str, vector: Any, category: str | None, *, entries: int | None = None, timeout_s: float | None = None
    ) -> SearchRequest:
        return SearchRequest(
            self.mode,
            self.depth,
            vector if self.with_vector else None,
            text=text,
            category=category,
            alpha=self.alpha,
            timeout_s=timeout_s,
            entries=entries if self.grouped else None,
        )


@dataclass(frozen=True)
class Pipeline:
    """A named list of L1 retrievers; L0 always runs. `routed`: filter L1 on the L0 domain when exactly one
    is hinted (routing.category_filter); otherwise L1 runs unfiltered. `fusion`: the ranking is the lookup's fusion
    of L0 and the L1 lists (ranking.fuse); otherwise the one L1 list as it came. No queries: L0 alone."""

    name: str
    queries: tuple[L1Query, ...] = ()
    routed: bool = True
    fusion: bool = False

    @property
    def l1(self) -> bool:
        return bool(self.queries)


def lookup_pipeline(settings: Settings, *, name: str = "lookup") -> Pipeline:
    """The L1 queries of the lookup at these settings, candidate_depth(settings) deep: the vector (or hybrid)
    query (grouped by entry when the caller knows the entry count), and in fusion the BM25F query beside it."""
    depth = candidate_depth(settings)
    mode = LookupMode(settings.search_mode)
    kind = SearchMode.HYBRID if mode is LookupMode.HYBRID else SearchMode.NEAR_VECTOR
    main = L1Query(kind, depth, settings.hybrid_alpha, grouped=True)
    if mode is LookupMode.FUSION:
        return Pipeline(name, (main, L1Query(SearchMode.BM25, depth, with_vector=False)), fusion=True)
    return Pipeline(name, (main,), fusion=True)


def single_query(name: str, mode: SearchMode, settings: Settings, *, routed: bool, depth: int | None = None) -> Pipeline:
    """One Weaviate query alone, top_k deep unless told, fetching similarities whatever its kind."""
    return Pipeline(name, (L1Query(mode, settings.top_k if depth is None else depth, settings.hybrid_alpha),), routed=routed)


def route(hints: L0Hints, pipeline: Pipeline) -> str | None:
    """The L1 filter of this pipeline for these hints (None: unfiltered)."""
    return category_filter(hints.domains) if pipeline.routed else None


def search_l1(
    store: KnowledgeSearch,
    queries: Sequence[L1Query],
    *,
    text: str,
    vector: Any,
    category: str | None,
    timeout_s: float | None = None,
    entries: int | None = None,
) -> tuple[tuple[Candidate, ...], ...]:
    """The candidates of each query, in order, under `category` (None: unfiltered). The first runs on this
    thread while the others run on worker threads; a query without vectors takes each entry's similarity
    from the first query's candidates. `entries`: the corpus's entries under `category`, for grouped
    queries. Raises L1Error."""
    if not queries:
        return ()
    first, *rest = queries

    def run(q: L1Query) -> list[Candidate]:
        return store.search(q.request(text, vector, category, entries=entries, timeout_s=timeout_s))

    pending = [start(functools.partial(run, q)) for q in rest]
    found = run(first)
    sims = {c.entry_id: c.similarity for c in found}
    out = [tuple(found)]
    for q, job in zip(rest, pending, strict=True):
        got = job.result()
        out.append(tuple(got) if q.with_vector else tuple(replace(c, similarity=sims.get(c.entry_id)) for c in got))
    return tuple(out)


def with_similarities(
    results: Sequence[ResultItem], store: KnowledgeSearch | None, vector: Any, settings: Settings
) -> tuple[ResultItem, ...]:
    """`results` with the similarity of the query to each BM25F-only result's card (l1_score), which the
    vector query did not reach and the BM25F query does not fetch: one query for those cards, and none when
    there are none (the usual case). When that query fails they stay without one, so no semantic support is
    claimed on their account."""
    missing = [r.entry_id for r in results if r.l1_score is None and r.lexical_score is not None]
    if not missing or store is None or vector is None:
        return tuple(results)
    try:
        cards = store.search(SearchRequest.cards(vector, missing, timeout_s=settings.l1_timeout_s))
    except L1Error:
        return tuple(results)
    sims = {c.entry_id: c.similarity for c in cards}
    return tuple(replace(r, l1_score=sims[r.entry_id]) if sims.get(r.entry_id) is not None else r for r in results)


def rank(
    l0: Sequence[EntryMatch],
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    settings: Settings,
    *,
    k: int,
    limit: int | None = None,
) -> list[ResultItem]:
    """The fused ranking at the settings' weights, k long. `limit`: the candidates each L1 query was asked for
    (ranking.list_bound)."""
    return fuse(l0, vector, lexical, k=k, weights=weights_of(settings), limit=limit)


def limit_of(pipeline: Pipeline) -> int | None:
    """The candidates the pipeline's L1 queries ask for (all ask for as many); None without L1."""
    return pipeline.queries[0].depth if pipeline.queries else None


def judge(
    results: Sequence[ResultItem],
    l1_status: L1Status,
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    query: str,
    settings: Settings,
    norms: SupportNorms | None = None,
) -> Relevance:
    """The support assessment of the top result, with the settings' model and threshold, read against the knowledge
    base's `norms` (None: the model's reference baselines)."""
    return assess(
        results,
        l1_status,
        support=support_model(settings.embedding_model),
        norms=norms or reference_norms(settings.embedding_model),
        vector=vector,
        lexical=lexical,
        query=query,
        threshold=settings.support_threshold,
    )
