"""lookup_knowledge: L0 hints always, L1 (filtered on the L0 domain when it is unambiguous), fallback, record."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .candidates import Candidate
from .config import Settings
from .deadline import start
from .embedding import Embedder
from .errors import L1Error, QueryError
from .hints import L0Hints, L0Index
from .invocations import TOOL_NAME, InvocationRecord, InvocationStore, new_invocation_id, utc_now_iso
from .ranking import FusionWeights, Relevance, ResultItem, assess, fuse
from .routing import category_filter, describe_routing
from .support import support_model
from .text import without_templates
from .weaviate_store import KnowledgeStore

MAX_QUERY_CHARS = 2000
L1_STATUSES = ("ok", "empty", "failed", "disabled", "unavailable")


@dataclass(frozen=True)
class L1Outcome:
    """What L1 did: `candidates` from the vector (or hybrid) query, `lexical` from the BM25F query."""

    status: str
    category: str | None
    candidates: tuple[Candidate, ...] = ()
    error: str | None = None
    mode: str = "near_vector"
    lexical: tuple[Candidate, ...] = ()

    @property
    def signals(self) -> tuple[str, ...]:
        """The L1 signals that returned something: vector (or hybrid), bm25."""
        return tuple(name for name, found in (("vector", self.candidates), ("bm25", self.lexical)) if found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
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
        return self.l0.has_match and self.l1.status != "ok"

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


@dataclass(frozen=True)
class LookupServices:
    """What a lookup needs, passed in. `store`/`embedder` are None when L1 is off or unreachable."""

    l0: L0Index
    embedder: Embedder | None = None
    store: KnowledgeStore | None = None
    recorder: InvocationStore | None = None
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
    query: str, category: str | None, services: LookupServices, settings: Settings, timings: dict[str, float]
) -> tuple[L1Outcome, Any]:
    """What L1 did, and the query vector (None when L1 did not run)."""
    mode = settings.search_mode
    if not settings.l1_enabled:
        return L1Outcome("disabled", category, mode=mode), None
    if services.store is None or services.embedder is None:
        return L1Outcome("unavailable", category, error=services.l1_unavailable or "L1 is not connected", mode=mode), None
    t0 = time.perf_counter()
    vector = services.embedder.embed_query(query)
    timings["embed"] = (time.perf_counter() - t0) * 1000
    entries = services.l0.entry_count(category)
    t0 = time.perf_counter()
    try:
        found, lexical = l1_queries(services.store, vector, text=query, category=category, settings=settings, entries=entries)
    except L1Error as exc:
        timings["l1"] = (time.perf_counter() - t0) * 1000
        return L1Outcome("unavailable" if exc.unavailable else "failed", category, error=str(exc), mode=mode), None
    timings["l1"] = (time.perf_counter() - t0) * 1000
    outcome = L1Outcome("ok" if found or lexical else "empty", category, tuple(found), mode=mode, lexical=tuple(lexical))
    return outcome, vector


def l1_queries(
    store: KnowledgeStore, vector: Any, *, text: str, category: str | None, settings: Settings, entries: int | None = None
) -> tuple[list[Candidate], list[Candidate]]:
    """The L1 queries of `settings.search_mode`, candidate_depth deep under `category` (None: unfiltered):
    (vector or hybrid candidates, BM25F candidates). In fusion the BM25F query runs on a worker thread while
    this one makes the vector query; in the other modes there is no BM25F query ([]). `entries`: the corpus's
    entries under `category`, when known (KnowledgeStore.search). Raises L1Error.

    The BM25F query asks for no vectors (20 of them were a fifth of L1's time): a BM25F candidate the vector
    query also found gets that entry's similarity from it; the others have none here, and the few of them a
    lookup shows get theirs from `with_similarities`."""
    depth = candidate_depth(settings.top_k)
    kind = "hybrid" if settings.search_mode == "hybrid" else "near_vector"

    def lexical_query() -> list[Candidate]:
        return store.search(None, k=depth, category=category, mode="bm25", query_text=text, timeout_s=settings.l1_timeout_s)

    pending = start(lexical_query) if settings.search_mode == "fusion" else None
    found = store.search(
        vector,
        k=depth,
        category=category,
        mode=kind,
        query_text=text,
        alpha=settings.hybrid_alpha,
        timeout_s=settings.l1_timeout_s,
        entries=entries,
    )
    if pending is None:
        return found, []
    sims = {c.entry_id: c.similarity for c in found}
    return found, [replace(c, similarity=sims.get(c.entry_id)) for c in pending.result()]


def with_similarities(
    results: Sequence[ResultItem], store: KnowledgeStore | None, vector: Any, settings: Settings
) -> tuple[ResultItem, ...]:
    """`results` with the similarity of the query to each BM25F-only result's card (l1_score), which the
    vector query did not reach and the BM25F query does not fetch: one query for those cards, and none when
    there are none (the usual case). When that query fails they stay without one, so no semantic support is
    claimed on their account."""
    missing = [r.entry_id for r in results if r.l1_score is None and r.lexical_score is not None]
    if not missing or store is None or vector is None:
        return tuple(results)
    try:
        cards = store.search(vector, k=len(missing), cards_of=missing, timeout_s=settings.l1_timeout_s)
    except L1Error:
        return tuple(results)
    sims = {c.entry_id: c.similarity for c in cards}
    return tuple(replace(r, l1_score=sims[r.entry_id]) if sims.get(r.entry_id) is not None else r for r in results)


# Candidates per L1 query. Depths 10 to 50 rank the shared summaries and descriptions alike (mrr@10 within
# one case per set; README, "How the lookup ranks"); 10 makes the near_vector query, which must reach that
# many distinct entries through their chunks, about a sixth cheaper than 20.
CANDIDATE_DEPTH = 10


def candidate_depth(top_k: int) -> int:
    """Candidates each L1 query returns for the fusion: at least as many as are shown (the two lists
    together hold up to twice that), and the same for a lookup and an eval run (top 10)."""
    return max(top_k, CANDIDATE_DEPTH)


def weights_of(settings: Settings) -> FusionWeights:
    return FusionWeights(
        vector=settings.vector_weight, lexical=settings.lexical_weight, l0=settings.l0_weight, named=settings.name_weight
    )


def lookup_knowledge(query: str, services: LookupServices, settings: Settings, *, session_tag: str | None = None) -> LookupResult:
    """The full flow of the spec. Raises QueryError for a refused query; never for an L1 fault."""
    started = time.perf_counter()
    text = clean_query(query)
    searched = _templates_as_words(text)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hints = services.l0.match(searched)
    timings["l0"] = (time.perf_counter() - t0) * 1000
    category = category_filter(hints.domains)
    l1, vector = _run_l1(searched, category, services, settings, timings)
    t0 = time.perf_counter()
    results = tuple(fuse(hints.matches, l1.candidates, l1.lexical, k=settings.top_k, weights=weights_of(settings)))
    timings["fuse"] = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    results = with_similarities(results, services.store, vector, settings)
    if vector is not None:
        timings["l1"] += (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    relevance = assess(
        results,
        l1.status,
        support=support_model(settings.embedding_model),
        vector=l1.candidates,
        lexical=l1.lexical,
        query=searched,
        threshold=settings.support_threshold,
    )
    timings["fuse"] += (time.perf_counter() - t0) * 1000
    timings["total"] = (time.perf_counter() - started) * 1000
    result = LookupResult(
        invocation_id=new_invocation_id(),
        created_at=utc_now_iso(),
        query=text,
        layer=layer_for(hints.has_match, l1.status == "ok"),
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
    """The tool_invocation row: hot fields typed, the rest in retrieval_details."""
    details = {
        "searched": result.searched or result.query,
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
        domain=result.l1.category or (result.l0.domains[0] if result.l0.domains else None),
        l1_status=result.l1.status,
        fallback=result.fallback,
        top_entry_id=top.entry_id if top else None,
    )
