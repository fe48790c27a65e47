"""One Weaviate query of a knowledge collection, and its hits folded into entries: the query of each SearchMode, the
category filter, why a query failed, and what a restarted server answers while it loads."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from weaviate.classes.query import Filter, GroupBy, HybridFusion, MetadataQuery

from retrieval.core.candidates import Candidate
from retrieval.core.deadline import TimedOut
from retrieval.core.search_request import SearchRequest
from retrieval.store.collection_schema import LEXICAL_FIELDS
from retrieval.types.modes import SearchMode

SEARCH_KINDS = tuple(m.value for m in SearchMode)
OVERSAMPLE = 4  # chunk hits fetched per wanted entry by hybrid at first
MAX_OVERSAMPLE = 64  # at most this many, when folding the hits leaves fewer than k entries
PARTITION_RECHECK_S = 30.0  # how long a search trusts what it last read of the partition's state
GRACE_S = 0.25  # past the time-out, so that the client's own deadline error normally comes first
# What a query answers while a (re)started server loads its shards: the schema is not served yet.
LOADING_SIGNS = ("could not find class", "non-existing index", "not ready", "is loading")
LOADING = "Weaviate is loading the index (the server has restarted and its shards are not loaded yet); try again in a few seconds"


def category_where(category: str | None):
    """The one place the L0-derived category becomes a Weaviate where-filter."""
    return None if category is None else Filter.by_property("category").equal(category)


RETURNED = ["entry_id", "title", "category", "chunk_index", "text"]


def where_of(request: SearchRequest) -> Any:
    """The request's where-filter: its category, and for a cards query the cards of its entries."""
    where = category_where(request.category)
    if request.cards_of is not None:
        cards = Filter.by_property("entry_id").contains_any(list(request.cards_of)) & Filter.by_property("chunk_index").equal(0)
        where = cards if where is None else where & cards
    return where


def ask(handle: Any, request: SearchRequest, floats: list[float] | None, where: Any, limit: int, *, in_tenant: bool) -> Any:
    """The Weaviate query of the request's mode on `handle` (the collection, or a domain's tenant, which needs no
    filter), `limit` hits deep. A near_vector query groups its hits by entry when the request knows the entry count."""
    q = handle.query
    meta = MetadataQuery(distance=True, score=True)
    if request.mode is SearchMode.HYBRID:
        return q.hybrid(
            query=request.text,
            vector=floats,
            alpha=request.alpha,
            limit=limit,
            filters=where,
            query_properties=list(LEXICAL_FIELDS),
            fusion_type=HybridFusion.RELATIVE_SCORE,
            return_metadata=meta,
            return_properties=RETURNED,
            include_vector=True,
        )
    if request.mode is SearchMode.BM25:
        return q.bm25(
            query=request.text,
            query_properties=list(LEXICAL_FIELDS),
            limit=limit,
            filters=where,
            return_metadata=meta,
            return_properties=RETURNED,
            include_vector=floats is not None,
        )
    groups = grouped_to(request)
    by_entry = None if groups is None else entry_groups(request.limit)
    return q.near_vector(
        near_vector=floats,
        limit=limit,
        filters=None if in_tenant else where,
        return_metadata=meta,
        return_properties=RETURNED,
        group_by=by_entry,
    )


def entry_groups(k: int) -> GroupBy:
    """How a near_vector query's chunk hits are grouped: by entry, its best chunk, `k` entries."""
    return GroupBy(prop="entry_id", objects_per_group=1, number_of_groups=k)


def grouped_to(request: SearchRequest) -> int | None:
    """The entry count a near_vector query groups its hits by (the part searched holds that many), or None."""
    if request.mode is not SearchMode.NEAR_VECTOR or request.cards_of is not None:
        return None
    return request.entries


def deadline_of(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else time.monotonic() + timeout_s


def failure_reason(exc: BaseException, timeout_s: float | None) -> str:
    if isinstance(exc, TimedOut):
        return f"timed out after {timeout_s:g} s (no answer; the server may be down or overloaded)"
    text = f"{type(exc).__name__}: {exc}"
    if "Deadline Exceeded" in text or "DEADLINE_EXCEEDED" in text:
        return f"timed out after {timeout_s:g} s ({text})" if timeout_s else f"timed out ({text})"
    return text


def fold_chunks(
    objects: Iterable[Any], *, k: int, mode: SearchMode = SearchMode.NEAR_VECTOR, vector: Sequence[float] | None = None
) -> list[Candidate]:
    """Keep each entry's best chunk, in rank order (by the search's score); ties broken by entry id.
    The similarity is 1 - distance for near_vector, else the cosine of `vector` to the returned chunk
    vectors (stored vectors are normalised), the best of the entry's chunks."""
    best: dict[str, Candidate] = {}
    sims: dict[str, float] = {}
    q = None if vector is None else np.asarray(vector, dtype=np.float32)
    for obj in objects:
        p = obj.properties
        distance = obj.metadata.distance
        if mode is SearchMode.NEAR_VECTOR:
            score = 1.0 - float(distance)
            sim: float | None = score
        else:
            score = float(obj.metadata.score or 0.0)
            stored = obj.vector.get("default") if isinstance(obj.vector, dict) else None
            sim = None if q is None or stored is None else float(np.dot(q, np.asarray(stored, dtype=np.float32)))
        entry_id = p["entry_id"]
        if sim is not None:
            sims[entry_id] = max(sims.get(entry_id, -1.0), sim)
        cand = Candidate(
            entry_id,
            p["title"],
            p["category"],
            None if distance is None else float(distance),
            score,
            int(p["chunk_index"]),
            p["text"],
            sim,
        )
        if entry_id not in best or cand.score > best[entry_id].score:
            best[entry_id] = cand
    ranked = sorted(best.values(), key=lambda c: (-c.score, c.entry_id))[:k]
    # near_vector: an entry's best chunk is its most similar one already (no copy to make)
    return [c if c.similarity == sims.get(c.entry_id) else replace(c, similarity=sims.get(c.entry_id)) for c in ranked]
