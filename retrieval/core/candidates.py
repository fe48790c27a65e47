"""What L1 returns for one entry and what L1 did: the shared types of the store, the pipeline, the ranking and the pages."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One entry L1 found, by its best chunk: the search's own score, and the cosine similarity of the
    query vector to that chunk's vector whatever the search was (None when no vector was given)."""

    entry_id: str
    title: str
    domain: str
    distance: float | None
    score: float  # 1 - distance for near_vector, the fused score for hybrid, the BM25F score for bm25
    chunk_index: int
    snippet: str
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "distance": None if self.distance is None else round(self.distance, 5),
            "score": round(self.score, 5),
            "similarity": None if self.similarity is None else round(self.similarity, 5),
            "chunk_index": self.chunk_index,
            "snippet": self.snippet[:240],
        }


def without(found: Sequence[Sequence[Candidate]], drop: Collection[str], depth: int) -> tuple[tuple[Candidate, ...], ...]:
    """Each L1 list (the vector list first) without the entries `drop`, cut to `depth`, as the lookup would have got it
    from a knowledge base without them: a list after the first (BM25F, which fetches no vectors) takes its candidates'
    similarities from the first as cut."""
    lists = [tuple(c for c in f if c.entry_id not in drop)[:depth] for f in found]
    if len(lists) > 1:
        sims = {c.entry_id: c.similarity for c in lists[0]}
        lists[1:] = [tuple(replace(c, similarity=sims.get(c.entry_id)) for c in f) for f in lists[1:]]
    return tuple(lists)
