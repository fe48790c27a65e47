"""L1: a pipeline's Weaviate queries for one searched text, and what they found (`L1Outcome`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval.core.candidates import Candidate
from retrieval.core.deadline import start
from retrieval.core.pipeline import L1Query
from retrieval.types.modes import L1Status, LookupMode, SearchMode

if TYPE_CHECKING:
    from retrieval.core.protocols import KnowledgeSearch


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
    """The candidates of each query, in order, under `category` (None: unfiltered): the first on this thread, the
    others beside it; a query without vectors borrows each entry's similarity from the first. Raises L1Error."""
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
