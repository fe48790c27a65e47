"""lookup_knowledge: L0 hints always, L1 (filtered on the L0 domain when it is unambiguous), fallback, record."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from retrieval.config import Settings
from retrieval.core.candidates import Candidate, L1Status
from retrieval.core.hints import L0Hints, L0Index
from retrieval.core.pipeline import (
    Pipeline,
    judge,
    limit_of,
    lookup_pipeline,
    rank,
    route,
    search_l1,
    with_similarities,
)
from retrieval.core.pipeline import candidate_depth as candidate_depth  # re-exported: pages, the lab and tests
from retrieval.core.pipeline import weights_of as weights_of
from retrieval.core.protocols import KnowledgeSearch, QueryEmbedder, Recorder
from retrieval.core.ranking import Relevance, ResultItem
from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.core.routing import describe_routing
from retrieval.core.text import without_templates
from retrieval.errors import L1Error, QueryError

MAX_QUERY_CHARS = 2000
L1_STATUSES = tuple(s.value for s in L1Status)


@dataclass(frozen=True)
class L1Outcome:
    """What L1 did: `candidates` from the vector (or hybrid) query, `lexical` from the BM25F query."""

    status: L1Status
    category: str | None  # the filter the routing chose (None: unfiltered); applied_filter: only when L1 ran
    candidates: tuple[Candidate, ...] = ()
    error: str | None = None
    mode: str = "near_vector"
    lexical: tuple[Candidate, ...] = ()

    @property
    def applied_filter(self) -> str | None:
        """The category L1 searched under: None when it ran unfiltered or did not run at all."""
        ran = self.status in (L1Status.OK, L1Status.EMPTY, L1Status.FAILED)
        return self.category if ran else None

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
            "mode": self.mode,
        }


@dataclass(frozen=True)
class LookupResult:
    invocation_id: str
    created_at: str
    query: str
    layer: str
    status: str
    l0: L0Hints
    l1: L1Outcome
    results: tuple[ResultItem, ...]
    relevance: Relevance
    routing: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    session_tag: str = "default"
    searched: str = ""  # what L0 and L1 searched for (search_text of the query); "" for the query itself
    embedding_model: str = ""  # the model L1 searched with

    @property
    def fallback(self) -> bool:
        return self.l0.has_match and self.l1.status is not L1Status.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation_id": self.invocation_id,
            "created_at": self.created_at,
            "query": self.query,
            "searched": self.searched or self.query,
            "layer": self.layer,
            "status": self.status,
            "routing": self.routing,
            "fallback": self.fallback,
            "l0": self.l0.to_dict(),
            "l1": self.l1.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "relevance": self.relevance.to_dict(),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "session_tag": self.session_tag,
            "embedding_model": self.embedding_model,
        }


Store = TypeVar("Store", bound=KnowledgeSearch)
Model = TypeVar("Model", bound=QueryEmbedder)
Sink = TypeVar("Sink", bound=Recorder)


@dataclass(frozen=True)
class LookupServices(Generic[Store, Model, Sink]):
    """What a lookup needs, passed in. `store`/`embedder` are None when L1 is off or unreachable. Generic in
    the services' types: the lookup needs only their protocols (retrieval.core.protocols), while the edge that
    opened them (retrieval.services) keeps their own types."""

    l0: L0Index
    embedder: Model | None = None
    store: Store | None = None
    recorder: Sink | None = None
    l1_unavailable: str | None = None  # why L1 cannot be used, when it cannot


def clean_query(query: str) -> str:
    """Refuse what no retrieval should run on; collapse control characters to spaces."""
    if not isinstance(query, str):
        raise QueryError(f"query must be text, got {type(query).__name__}")
    text = "".join(ch if ch.isprintable() else " " for ch in query).strip()
    if not text:
        raise QueryError("query is empty: type a question or an alert summary")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"query is {len(text)} characters, over the {MAX_QUERY_CHARS} character limit")
    return text


def search_text(query: str) -> str:
    """What L0 and L1 search for: the query (clean_query) with the Go template expressions an alerting rule's
    text holds written as the words they stand for ("{{ $labels.pod }}" -> "pod"); a query of templates alone
    is searched as it is."""
    return _templates_as_words(clean_query(query))


def _templates_as_words(text: str) -> str:
    """search_text of a query clean_query has cleaned already."""
    return without_templates(text) or text


def layer_for(l0_matched: bool, l1_answered: bool) -> str:
    if l0_matched and l1_answered:
        return "L0+L1"
    if l0_matched:
        return "L0"
    if l1_answered:
        return "L1"
    return "none"


def _run_l1(
    query: str, category: str | None, pipeline: Pipeline, services: LookupServices, settings: Settings, timings: dict[str, float]
) -> tuple[L1Outcome, Any]:
    """What L1 did, and the query vector (None when L1 did not run)."""
    mode = settings.search_mode
    if not settings.l1_enabled:
        return L1Outcome(L1Status.DISABLED, category, mode=mode), None
    if services.store is None or services.embedder is None:
        why = services.l1_unavailable or "L1 is not connected"
        return L1Outcome(L1Status.UNAVAILABLE, category, error=why, mode=mode), None
    t0 = time.perf_counter()
    vector = services.embedder.embed_query(query)
    timings["embed"] = (time.perf_counter() - t0) * 1000
    entries = services.l0.entry_count(category)
    t0 = time.perf_counter()
    try:
        found = search_l1(
            services.store,
            pipeline.queries,
            text=query,
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
    candidates, lexical = found[0], found[1] if len(found) > 1 else ()
    status = L1Status.OK if candidates or lexical else L1Status.EMPTY
    return L1Outcome(status, category, candidates, mode=mode, lexical=lexical), vector


def lookup_knowledge(query: str, services: LookupServices, settings: Settings, *, session_tag: str | None = None) -> LookupResult:
    """The full flow of the spec. Raises QueryError for a refused query; never for an L1 fault."""
    started = time.perf_counter()
    text = clean_query(query)
    searched = _templates_as_words(text)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hints = services.l0.match(searched)
    timings["l0"] = (time.perf_counter() - t0) * 1000
    pipeline = lookup_pipeline(settings)
    category = route(hints, pipeline)
    l1, vector = _run_l1(searched, category, pipeline, services, settings, timings)
    t0 = time.perf_counter()
    results = tuple(rank(hints.matches, l1.candidates, l1.lexical, settings, k=settings.top_k, limit=limit_of(pipeline)))
    timings["fuse"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    results = with_similarities(results, services.store, vector, settings)
    if vector is not None:
        timings["l1"] += (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    relevance = judge(results, l1.status, l1.candidates, l1.lexical, searched, settings)
    timings["fuse"] += (time.perf_counter() - t0) * 1000
    timings["total"] = (time.perf_counter() - started) * 1000
    result = LookupResult(
        invocation_id=new_invocation_id(),
        created_at=utc_now_iso(),
        query=text,
        layer=layer_for(hints.has_match, l1.status is L1Status.OK),
        status="ok" if results else "empty",
        l0=hints,
        l1=l1,
        results=results,
        relevance=relevance,
        routing=describe_routing(hints.domains),
        timings_ms=timings,
        session_tag=session_tag or settings.session_tag,
        searched=searched if searched != text else "",
        embedding_model=settings.embedding_model,
    )
    if services.recorder is not None:
        t0 = time.perf_counter()
        services.recorder.record(to_record(result))
        timings["record"] = (time.perf_counter() - t0) * 1000
    return result


def to_record(result: LookupResult) -> InvocationRecord:
    """The tool_invocation row: hot fields typed, the rest in retrieval_details. `domain` (and the details'
    `filter`) is the L1 filter, set only when one was applied; `domains` lists every domain L0 hinted.
    (Rows recorded before these held the first hinted domain as `domain` even when L1 ran unfiltered;
    invocations.routing_of reads both.)"""
    details = {
        "searched": result.searched or result.query,
        "domains": list(result.l0.domains),
        "filter": result.l1.applied_filter,
        "embedding_model": result.embedding_model,
        "layer": result.layer,
        "routing": result.routing,
        "fallback": result.fallback,
        "l0": result.l0.to_dict(),
        "l1": result.l1.to_dict(),
        "relevance": result.relevance.to_dict(),
        "timings_ms": {k: round(v, 3) for k, v in result.timings_ms.items()},
    }
    top = result.results[0] if result.results else None
    return InvocationRecord(
        id=result.invocation_id,
        created_at=result.created_at,
        tool_name=TOOL_NAME,
        input=result.query,
        status=result.status,
        layer=result.layer,
        latency_ms=round(result.timings_ms.get("total", 0.0), 3),
        result={"results": [r.to_dict() for r in result.results], "relevance": result.relevance.to_dict()},
        retrieval_details=details,
        error=result.l1.error,
        session_tag=result.session_tag,
        domain=result.l1.applied_filter,
        l1_status=result.l1.status.value,
        fallback=result.fallback,
        top_entry_id=top.entry_id if top else None,
    )
