"""What one L1 query asks of the knowledge store: the kind of query as an enum and its options as one frozen request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.types.modes import SearchMode


@dataclass(frozen=True)
class SearchRequest:
    """One query of the knowledge collection (KnowledgeStore.search).

    `vector`: the query vector; every candidate then carries the cosine similarity of it to its best chunk
    (needed by near_vector and hybrid, optional for bm25). `text`: what BM25F and hybrid search for.
    `category`: the L1 filter (None: unfiltered). `entries`: how many entries the searched part holds, when
    known: a near_vector query then groups its chunk hits by entry. `cards_of`: search only the cards (chunk
    0) of these entries, one hit each. `timeout_s`: None for the time-out `connect` gave the client."""

    mode: SearchMode
    limit: int
    vector: Any = field(default=None, compare=False, repr=False)  # a sequence of floats or a numpy array
    text: str = ""
    category: str | None = None
    alpha: float = 0.5
    timeout_s: float | None = None
    entries: int | None = None
    cards_of: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # a plain string names a mode too ("bm25"); anything else is refused here, before any query
        object.__setattr__(self, "mode", SearchMode(self.mode))
        if self.limit < 1:
            raise ValueError(f"a search limit must be at least 1, got {self.limit}")
        if self.vector is None and self.mode is not SearchMode.BM25:
            raise ValueError(f"a {self.mode} search needs a query vector")

    @classmethod
    def cards(cls, vector: Any, entry_ids: Sequence[str], *, timeout_s: float | None = None) -> SearchRequest:
        """The similarity of `vector` to the cards of these entries (near_vector over chunk 0 of each)."""
        return cls(SearchMode.NEAR_VECTOR, max(len(entry_ids), 1), vector, timeout_s=timeout_s, cards_of=tuple(entry_ids))
