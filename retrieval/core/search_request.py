"""What one L1 query asks of the knowledge store: the kind of query as an enum and its options as one frozen request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.types.modes import SearchMode


@dataclass(frozen=True)
class SearchRequest:
    """One query of the knowledge collection (KnowledgeStore.search)."""

    mode: SearchMode
    limit: int
    # The query vector (floats or a numpy array): every candidate then carries its cosine to its best chunk; needed by
    # near_vector and hybrid, optional for bm25.
    vector: Any = field(default=None, compare=False, repr=False)
    text: str = ""  # what BM25F and hybrid search for
    category: str | None = None  # the L1 filter (None: unfiltered)
    alpha: float = 0.5
    timeout_s: float | None = None  # None: the time-out `connect` gave the client
    entries: int | None = None  # the entries the searched part holds, when known: near_vector then groups hits by entry
    cards_of: tuple[str, ...] | None = None  # search only the cards (chunk 0) of these entries, one hit each

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
