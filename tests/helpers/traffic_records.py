"""Recorded calls made by hand with what traffic reads: the support estimate, its claim and fit, the L0 match,
the routed and top domains, the collection, the day."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from retrieval.core.record import InvocationRecord, new_invocation_id

from .records import make_record

FIT = {"model": "labelled", "baselines": {"kind": "self", "id": "fit0000000a1", "probes": 40}}
DAY0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def call(
    query: str,
    support: float | None,
    *,
    day: int = 0,
    tag: str = "agent",
    routed: str | None = None,
    top_domain: str | None = "storage",
    fallback: bool = False,
    matched: bool = True,
    titles: tuple[str, ...] = (),
    collection: str = "Kb_test",
    fit: dict | None = None,
    threshold: float = 0.5,
) -> InvocationRecord:
    """One call on day `day` after DAY0; supported when the support reaches the threshold."""
    base = make_record(0)
    l0 = {"matches": [{"entry_id": "x", "named": bool(titles)}] if matched else [], "matched_titles": list(titles), "domains": []}
    relevance = {
        "confidence": support,
        "semantic_support": support is not None and support >= threshold,
        "fit": (fit or FIT) if support is not None else None,
    }
    results = [{"entry_id": "e1", "domain": top_domain}] if top_domain else []
    return replace(
        base,
        id=new_invocation_id(),
        created_at=(DAY0 + timedelta(days=day)).isoformat(),
        input=query,
        session_tag=tag,
        domain=routed,
        fallback=fallback,
        result={"results": results, "relevance": relevance},
        retrieval_details={**base.retrieval_details, "l0": l0, "relevance": relevance, "collection": collection},
        top_entry_id="e1" if top_domain else None,
    )
