"""What the corpus browser shows per entry (frontmatter, L0 index terms, chunk count, index state), and the
state of the index as a whole: current, out of date, needs repair (lost entries), loading, not indexed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from retrieval.core.chunking import chunk_entry, stored_hash
from retrieval.core.corpus import Corpus, Entry
from retrieval.core.hints import L0Index
from retrieval.store.index_health import unsearchable_chunks
from retrieval.store.partition import is_in_step

# indexed: in Weaviate with this content | stale: indexed from older content | partial: chunks missing
# lost: its chunks are stored but the vector index lost some (a killed server) | missing: not in the collection
# unknown: L1 unreachable, so nobody can tell
INDEX_STATES = ("indexed", "stale", "partial", "lost", "missing", "unknown")
DAMAGED = ("partial", "lost")  # entries the index had and lost: a repair redoes them


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


def index_state(entry: Entry, state: Mapping[str, tuple[str, int, int]] | None, lost: Mapping[str, int] | None = None) -> str:
    """One entry against KnowledgeStore.indexed_state() (entry_id -> (hash, chunks stored, chunks expected))
    and index_health.unsearchable_chunks (entry_id -> chunks the vector index cannot find)."""
    if state is None:
        return "unknown"
    have = state.get(entry.entry_id)
    if have is None:
        return "missing"
    content_hash, stored, expected = have
    if content_hash != stored_hash(entry):
        return "stale"
    if stored != expected:
        return "partial"
    return "lost" if lost and lost.get(entry.entry_id) else "indexed"


def entry_statuses(
    corpus: Corpus,
    l0: L0Index,
    *,
    tokenizer=None,
    max_tokens: int = 256,
    indexed_state: Mapping[str, tuple[str, int, int]] | None = None,
    lost: Mapping[str, int] | None = None,
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
                index_state(entry, indexed_state, lost),
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


# --- the index as a whole ---------------------------------------------------------------------------------
# current: every entry indexed and searchable | out_of_date: new or changed entries (an ingest adds them)
# needs_repair: entries the index had and lost (killed server) | loading: the server is loading its shards
# not_indexed: nothing indexed yet | unknown: L1 unreachable or the collection unreadable
HEALTH_STATES = ("current", "out_of_date", "needs_repair", "loading", "not_indexed", "unknown")


@dataclass(frozen=True)
class IndexReading:
    """What the server says about the collection: KnowledgeStore.indexed_state() and index_health.unsearchable_chunks,
    or why they could not be read (`loading`: transient, `error`: unreachable or unreadable)."""

    state: dict[str, tuple[str, int, int]] | None
    lost: dict[str, int] = field(default_factory=dict)
    loading: str | None = None
    error: str | None = None
    partition_in_step: bool | None = None  # the per-domain partition (retrieval.store.partition); None: not read


def read_index(store, unavailable: str | None = None) -> IndexReading:
    """Read the collection of `store` (a KnowledgeStore, or None when L1 is not connected: `unavailable` says why).
    Never raises: a collection that cannot be read is an IndexReading with its error."""
    if store is None:
        return IndexReading(None, error=unavailable or "L1 is not connected")
    try:
        loading = store.loading()
        if loading:
            return IndexReading(None, loading=loading)
        return IndexReading(store.indexed_state(), unsearchable_chunks(store), partition_in_step=is_in_step(store))
    except Exception as exc:
        loading = store.loading()
        return IndexReading(None, loading=loading) if loading else IndexReading(None, error=f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class IndexHealth:
    state: str  # one of HEALTH_STATES
    entries: int  # in the corpus
    missing: int = 0  # entries the index lost (chunks gone, or not found by vector search): the repair redoes them
    to_update: int = 0  # new or changed entries, not damage: the next ingest adds them
    reason: str | None = None  # why loading or unknown
    partition_in_step: bool | None = None  # False: searches on one domain use the where-filter until an ingest

    @property
    def partition_behind(self) -> bool:
        """Indexed, but the per-domain partition is not in step: filtered searches are slower, not wrong."""
        return self.partition_in_step is False and self.state in ("current", "out_of_date")

    @property
    def message(self) -> str:
        """One sentence for people, saying what is wrong and what to do."""
        m = self.entries
        if self.state == "needs_repair":
            return (
                f"The index needs repair: {self.missing} of {m} entries are missing (the Weaviate server stopped without "
                "saving them). Lookups cannot find them by meaning until they are indexed again."
            )
        if self.state == "loading":
            return "Weaviate is loading the index… (the server has restarted and its shards are not loaded yet)"
        if self.state == "not_indexed":
            return f"Nothing is indexed yet: ingest the {m} entries of the corpus."
        behind = (
            " Its per-domain partition is not in step (made by an older version, or an ingest stopped midway): searches"
            " on one domain use the slower where-filter until the next ingest rebuilds it, with no re-embedding."
            if self.partition_behind
            else ""
        )
        if self.state == "out_of_date":
            return f"The index is out of date: {self.to_update} of {m} entries are new or changed since the last ingest.{behind}"
        if self.state == "unknown":
            return f"The index state is unknown: {self.reason or 'L1 is not connected'}"
        return f"The index is current: all {m} entries indexed.{behind}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "entries": self.entries,
            "missing": self.missing,
            "to_update": self.to_update,
            "reason": self.reason,
            "partition_in_step": self.partition_in_step,
            "message": self.message,
        }


def index_health(entry_states: Sequence[str], *, loading: str | None = None, error: str | None = None) -> IndexHealth:
    """The index as a whole, from its entries' index states (INDEX_STATES) and why it could not be read.
    Loading wins (transient), then unreadable, then damage (repair), then nothing indexed, then changes."""
    n = len(entry_states)
    if loading:
        return IndexHealth("loading", n, reason=loading)
    counts = Counter(entry_states)
    if error or counts["unknown"]:
        return IndexHealth("unknown", n, reason=error)
    missing = sum(counts[s] for s in DAMAGED)
    to_update = counts["stale"] + counts["missing"]
    if missing:
        return IndexHealth("needs_repair", n, missing, to_update)
    if n and counts["missing"] == n:
        return IndexHealth("not_indexed", n, 0, n)
    if to_update:
        return IndexHealth("out_of_date", n, 0, to_update)
    return IndexHealth("current", n)


def corpus_health(corpus: Corpus, reading: IndexReading) -> IndexHealth:
    """index_health of `corpus` against what read_index found."""
    states = [index_state(e, reading.state, reading.lost) for e in corpus.entries]
    health = index_health(states, loading=reading.loading, error=reading.error)
    return replace(health, partition_in_step=reading.partition_in_step)
