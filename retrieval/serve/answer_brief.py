"""The two shapes of a lookup_knowledge answer over MCP (`detail`): "brief" (default), what an agent needs to act,
and "full", everything the lookup carries. Either way the call is recorded in full, by the lookup, before this.
Imports no core module at load (the server answers initialize before the core is imported)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import orjson

from retrieval.types.limits import EXCERPT_CHARS

if TYPE_CHECKING:
    from retrieval.core.lookup import LookupResult
    from retrieval.serve.api import KnowledgeLookup

ENTRY_URI = "kb://entry/"
BRIEF, FULL = "brief", "full"
DETAILS = (BRIEF, FULL)
# A brief answer of up to BRIEF_TOP_K results is at most BRIEF_CHARS characters of JSON text: its excerpts are
# shortened (never below MIN_EXCERPT_CHARS) until it fits. Larger top_k: the excerpts at their shortest, no bound.
BRIEF_CHARS = 2400
BRIEF_TOP_K = 5
MIN_EXCERPT_CHARS = 100
HINT_ITEMS = 4  # titles, keywords and entities a brief answer lists of the L0 hints (all the domains)
SIGNAL_WORDS = {"vector": "vector", "bm25": "BM25F", "l0": "L0"}


def answer_payload(result: LookupResult, kb: KnowledgeLookup, detail: str = BRIEF) -> dict[str, Any]:
    """The structured content of a lookup at `detail` ("brief" or "full")."""
    return full_payload(result, kb) if detail == FULL else brief_payload(result, kb)


def text_of(payload: dict[str, Any]) -> str:
    """The JSON text of an answer, as the tool result's text content carries it."""
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def brief_payload(result: LookupResult, kb: KnowledgeLookup) -> dict[str, Any]:
    """The claim first, then each result (id, title, domain, score, source, why it ranks there, an excerpt of its best
    chunk), the L0 hints in brief, the reason, layer, invocation_id and detail level; excerpts are cut so that up to
    BRIEF_TOP_K results fit BRIEF_CHARS characters of JSON text."""
    relevance = result.relevance
    excerpts = [result_excerpt(result, kb, item.entry_id) for item in result.results]
    items = [
        {
            "entry_id": item.entry_id,
            "title": item.title,
            "domain": item.domain,
            "score": round(item.score, 3),
            "source": str(item.source),
            "why": why(item.ranks, item.named),
            "excerpt": "",
        }
        for item in result.results
    ]
    hints, shown = result.l0, {item.title for item in result.results}
    payload = {
        "answer": result.answer,
        "relevance": {
            "semantic_support": relevance.semantic_support,
            "level": relevance.level,
            "estimate": _percent(relevance.confidence),
        },
        "results": items,
        "hints": {
            "domains": list(hints.domains),
            # the titles L0 matched that are not among the results (theirs say so in `why`: "L0 #n")
            "matched_titles": [t for t in hints.matched_titles if t not in shown][:HINT_ITEMS],
            "keywords": list(dict.fromkeys(k.term for k in hints.matched_keywords))[:HINT_ITEMS],
            "entities": list(hints.entities[:HINT_ITEMS]),
        },
        "reason": relevance.reason,
        "layer": str(result.layer),
        "invocation_id": result.invocation_id,
        "detail": BRIEF,
    }
    fit_excerpts(payload, excerpts)
    return payload


def fit_excerpts(payload: dict[str, Any], excerpts: list[str], budget: int = BRIEF_CHARS) -> None:
    """Set each result's excerpt, cut to the longest length (EXCERPT_CHARS at most, MIN_EXCERPT_CHARS at least)
    at which the payload's JSON text fits `budget` characters."""
    items = payload["results"]
    for item, text in zip(items, excerpts, strict=True):
        item["excerpt"] = text
    if not items:
        return
    size = len(text_of(payload))
    limit = max(len(t) for t in excerpts)
    while size > budget and limit > MIN_EXCERPT_CHARS:
        # shorten the longest excerpts by what the payload is over, shared among the results
        limit = max(MIN_EXCERPT_CHARS, min(limit, EXCERPT_CHARS) - max(10, (size - budget) // len(items)))
        for item, text in zip(items, excerpts, strict=True):
            item["excerpt"] = shorten(text, limit)
        size = len(text_of(payload))


def shorten(text: str, limit: int) -> str:
    """`text` cut at a word so that it holds at most `limit` characters, "…" included."""
    if len(text) <= limit:
        return text
    body = text[: limit - 1]
    cut = body.rfind(" ")
    body = body[: cut if cut > limit // 2 else limit - 1].rstrip(" ,;:.…")
    return body + "…"


def why(ranks: tuple[tuple[str, int], ...], named: bool) -> str:
    """Why a result ranks where it does, in a few words: the rank each signal gave it ("vector #1, BM25F #3, L0 #2"),
    "only" when one signal alone found it, and whether the query names it in full."""
    found = ", ".join(f"{SIGNAL_WORDS.get(name, name)} #{rank}" for name, rank in ranks)
    if len(ranks) == 1:
        found += " only"
    return f"{found}; named in the query" if named else found


def result_excerpt(result: LookupResult, kb: KnowledgeLookup, entry_id: str) -> str:
    """The excerpt of a result's best-matching chunk (the vector list's, else the BM25F list's), its own text without
    the title line; the entry's opening prose when that chunk is the heading card or L1 did not find the entry."""
    for found in result.l1.found:
        for c in found:
            if c.entry_id == entry_id:
                return chunk_excerpt(c.snippet, c.chunk_index) or kb.opening(entry_id)
    return kb.opening(entry_id)


def full_payload(result: LookupResult, kb: KnowledgeLookup) -> dict[str, Any]:
    """Everything the lookup carries: LookupResult.to_dict() with its L0 part as `hints` (matches included), both L1
    lists, the relevance's features and fit, the timings; on each result an excerpt (result_excerpt) and a uri; the
    reason beside the relevance, and the detail level."""
    data = result.to_dict()
    data["hints"] = data.pop("l0")
    for item in data["results"]:
        entry_id = item["entry_id"]
        item["excerpt"] = result_excerpt(result, kb, entry_id)
        item["uri"] = ENTRY_URI + entry_id
    data["reason"] = result.relevance.reason
    data["detail"] = FULL
    return data


@functools.lru_cache(maxsize=4096)
def chunk_excerpt(text: str, chunk_index: int) -> str:
    """The excerpt of a best-matching chunk's own text: "" for the heading card (chunk 0, the title's words
    alone, so the entry's opening is shown instead); a section chunk without the title line the index puts
    in front of every section (retrieval.core.chunking). Cached: the same chunks come back again and again."""
    if chunk_index == 0:
        return ""
    from retrieval.serve.api import excerpt  # loaded by now: a lookup ran

    _title, _, body = text.partition("\n")
    return excerpt(body)


def _percent(chance: float | None) -> str:
    from retrieval.core.relevance import percent  # loaded by now: a lookup ran

    return percent(chance)
