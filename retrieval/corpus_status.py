"""What the corpus browser shows per entry: frontmatter, L0 index terms, chunk count, and index state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .chunking import chunk_entry, stored_hash
from .corpus import Corpus, Entry
from .hints import L0Index

# indexed: in Weaviate with this content | stale: indexed from older content | partial: chunks missing
# missing: not in the collection | unknown: L1 unreachable, so nobody can tell
INDEX_STATES = ("indexed", "stale", "partial", "missing", "unknown")


@dataclass(frozen=True)
class EntryStatus:
    entry_id: str
    title: str
    domain: str
    keywords: tuple[str, ...]
    entities: tuple[str, ...]
    frontmatter: dict[str, Any]
    index_terms: tuple[dict[str, Any], ...]
    chunks: int | None  # None without a tokenizer
    indexed: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "keywords": list(self.keywords),
            "entities": list(self.entities),
            "frontmatter": dict(self.frontmatter),
            "index_terms": [dict(t) for t in self.index_terms],
            "chunks": self.chunks,
            "indexed": self.indexed,
        }


def index_state(entry: Entry, state: Mapping[str, tuple[str, int, int]] | None) -> str:
    """One entry against KnowledgeStore.indexed_state() (entry_id -> (hash, chunks stored, chunks expected))."""
    if state is None:
        return "unknown"
    have = state.get(entry.entry_id)
    if have is None:
        return "missing"
    content_hash, stored, expected = have
    if content_hash != stored_hash(entry):
        return "stale"
    return "indexed" if stored == expected else "partial"


def entry_statuses(
    corpus: Corpus,
    l0: L0Index,
    *,
    tokenizer=None,
    max_tokens: int = 256,
    indexed_state: Mapping[str, tuple[str, int, int]] | None = None,
) -> list[EntryStatus]:
    out = []
    for entry in corpus.entries:
        chunks = len(chunk_entry(entry, tokenizer, max_tokens)) if tokenizer is not None else None
        out.append(
            EntryStatus(
                entry.entry_id,
                entry.title,
                entry.domain,
                entry.keywords,
                entry.entities,
                dict(entry.metadata),
                tuple(l0.index_terms(entry.entry_id)),
                chunks,
                index_state(entry, indexed_state),
            )
        )
    return out


def orphans(corpus: Corpus, indexed_state: Mapping[str, Any] | None) -> list[str]:
    """Entry ids the collection holds that the corpus no longer has (the next ingest removes them)."""
    if not indexed_state:
        return []
    return sorted(set(indexed_state) - {e.entry_id for e in corpus.entries})


def statuses_frame(statuses: list[EntryStatus], *, top_terms: int = 6) -> pd.DataFrame:
    """One row per entry, for a table."""
    return pd.DataFrame(
        [
            {
                "entry_id": s.entry_id,
                "title": s.title,
                "domain": s.domain,
                "indexed": s.indexed,
                "chunks": s.chunks,
                "index_terms": ", ".join(t["term"] for t in s.index_terms[:top_terms]),
                "keywords": ", ".join(s.keywords),
                "entities": ", ".join(s.entities),
            }
            for s in statuses
        ],
        columns=["entry_id", "title", "domain", "indexed", "chunks", "index_terms", "keywords", "entities"],
    )
