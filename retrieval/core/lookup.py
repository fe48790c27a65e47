"""lookup_knowledge: L0 hints always, L1 (filtered on the L0 domain when it is unambiguous), fallback, record."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from retrieval.core.hints import L0Hints
from retrieval.core.l1_search import L1Outcome
from retrieval.core.protocols import LookupServices
from retrieval.core.ranking import ResultItem
from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.core.relevance import Relevance
from retrieval.core.routing import describe_routing
from retrieval.core.runner import run_lookup
from retrieval.core.text import without_templates
from retrieval.errors import QueryError
from retrieval.types.limits import MAX_QUERY_CHARS
from retrieval.types.modes import L1Status, Layer
from retrieval.types.options import LookupOptions


@dataclass(frozen=True)
class LookupResult:
    invocation_id: str
    created_at: str
    query: str
    layer: Layer
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
    collection: str = ""  # the Weaviate collection (the corpus) the call was for

    @property
    def fallback(self) -> bool:
        return self.l0.has_match and self.l1.status is not L1Status.OK

    @property
    def answer(self) -> str:
        """What an agent reads first: whether the knowledge base holds a supported answer."""
        return self.relevance.verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "invocation_id": self.invocation_id,
            "created_at": self.created_at,
            "query": self.query,
            "searched": self.searched or self.query,
            "layer": str(self.layer),
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


def lookup_knowledge(
    query: str,
    services: LookupServices,
    options: LookupOptions,
    *,
    top_k: int | None = None,
    session_tag: str | None = None,
) -> LookupResult:
    """The full flow of the spec: the lookup's pipeline run on the checked query (`top_k` results, default the
    options'), then recorded. Raises QueryError for a refused query; never for an L1 fault."""
    started = time.perf_counter()
    text = clean_query(query)
    searched = _templates_as_words(text)
    if top_k is not None and top_k != options.top_k:
        options = options.with_(top_k=top_k)
    run = run_lookup(searched, services, options)
    timings = dict(run.timings_ms)
    timings["total"] = (time.perf_counter() - started) * 1000
    result = LookupResult(
        invocation_id=new_invocation_id(),
        created_at=utc_now_iso(),
        query=text,
        layer=run.layer,
        status="ok" if run.results else "empty",
        l0=run.hints,
        l1=run.l1,
        results=run.results,
        relevance=run.relevance,
        routing=describe_routing(run.hints.domains),
        timings_ms=timings,
        session_tag=session_tag or options.session_tag,
        searched=searched if searched != text else "",
        embedding_model=options.embedding_model,
        collection=options.collection,
    )
    if services.recorder is not None:
        t0 = time.perf_counter()
        services.recorder.record(to_record(result))
        timings["record"] = (time.perf_counter() - t0) * 1000
    return result


def to_record(result: LookupResult) -> InvocationRecord:
    """The tool_invocation row: hot fields typed, the rest in retrieval_details. `domain` (and the details'
    `filter`) is the L1 filter, set only when one was applied; `domains` lists every domain L0 hinted."""
    details = {
        "searched": result.searched or result.query,
        "domains": list(result.l0.domains),
        "filter": result.l1.applied_filter,
        "embedding_model": result.embedding_model,
        "collection": result.collection or None,
        "layer": str(result.layer),
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
        layer=str(result.layer),
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
