"""What a pipeline is: a named list of L1 retrievers (`L1Query`) over L0 -> route -> embed -> L1 -> fuse -> assess.
The lookup, evaluation's configurations, the filter comparison and the sweep all build theirs here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from retrieval.core.search_request import SearchRequest
from retrieval.types.modes import SearchMode


@dataclass(frozen=True)
class L1Query:
    """One L1 retriever: a Weaviate query of `mode`, `depth` candidates deep. `with_vector`: False for a BM25F query
    that borrows its similarities from the first query; `grouped`: a near_vector query grouped by entry."""

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
    """A named list of L1 retrievers; L0 always runs. `routed`: filter L1 on the L0 domain when exactly one is hinted;
    `fusion`: rank by the lookup's fusion of L0 and the L1 lists, else the one list as it came. No queries: L0 alone."""

    name: str
    queries: tuple[L1Query, ...] = ()
    routed: bool = True
    fusion: bool = False

    @property
    def l1(self) -> bool:
        return bool(self.queries)

    @property
    def limit(self) -> int | None:
        """The candidates its L1 queries ask for (all ask for as many); None without L1."""
        return self.queries[0].depth if self.queries else None
