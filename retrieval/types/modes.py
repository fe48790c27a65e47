"""The kinds every layer names: how L1 queries and ranks, what L1 did, which layers answered, the store's options.
Each is a StrEnum, written to JSON, DuckDB and YAML as its value, so stored strings stay as they were.
"""

from __future__ import annotations

from enum import StrEnum


class SearchMode(StrEnum):
    """A kind of Weaviate query: the query vector, Weaviate's hybrid of BM25F and the vector, or BM25F alone."""

    NEAR_VECTOR = "near_vector"
    HYBRID = "hybrid"
    BM25 = "bm25"


class LookupMode(StrEnum):
    """How the lookup's L1 ranks (Settings.search_mode): the vector and BM25F queries fused, the vector query
    alone, or Weaviate's hybrid query."""

    FUSION = "fusion"
    NEAR_VECTOR = "near_vector"
    HYBRID = "hybrid"


class L1Status(StrEnum):
    """What L1 did for one lookup: answered (ok), answered nothing (empty), failed, was turned off
    (disabled), or could not be reached or used (unavailable)."""

    OK = "ok"
    EMPTY = "empty"
    FAILED = "failed"
    DISABLED = "disabled"
    UNAVAILABLE = "unavailable"

    @property
    def answered(self) -> bool:
        return self is L1Status.OK

    @property
    def fault(self) -> bool:
        """L1 should have answered and did not (the lookup fell back on L0)."""
        return self in (L1Status.FAILED, L1Status.UNAVAILABLE)

    @property
    def ran(self) -> bool:
        """L1 was asked (it answered, answered nothing, or failed), so a filter it was given was applied."""
        return self in (L1Status.OK, L1Status.EMPTY, L1Status.FAILED)


class Layer(StrEnum):
    """Which layers took part in a lookup's answer (the recorded retrieval layer)."""

    BOTH = "L0+L1"
    L0 = "L0"
    L1 = "L1"
    NONE = "none"

    @classmethod
    def of(cls, l0_matched: bool, l1_answered: bool) -> Layer:
        if l0_matched and l1_answered:
            return cls.BOTH
        if l0_matched:
            return cls.L0
        return cls.L1 if l1_answered else cls.NONE


class Source(StrEnum):
    """Where one result came from: L0 alone, L1 alone, or both."""

    L0 = "L0"
    L1 = "L1"
    BOTH = "both"


class MissingScore(StrEnum):
    """What an entry counts for an L1 list that did not return it: the score of that list's last entry (an upper
    bound: the list is in score order) when the list came back full, for the BM25F list alone, for both lists, or
    zero for both (docs/quality.md, "Missing is not zero")."""

    BM25_LAST = "bm25_last"
    LAST = "last"
    ZERO = "zero"

    def bounds(self, signal: str) -> bool:
        """Whether a missing score of `signal` ("vector" or "bm25") counts its list's last."""
        return self is MissingScore.LAST or (self is MissingScore.BM25_LAST and signal == BM25_SIGNAL)


class Consistency(StrEnum):
    """Weaviate's consistency levels, for queries and ingest on a replicated collection."""

    ONE = "ONE"
    QUORUM = "QUORUM"
    ALL = "ALL"


class VectorCompression(StrEnum):
    """The vector index's compression: one of Weaviate's quantizers, or none."""

    NONE = "none"
    RQ = "rq"
    PQ = "pq"
    BQ = "bq"
    SQ = "sq"


BM25_SIGNAL = "bm25"  # the name of the BM25F list among the fusion's signals (vector, bm25, l0)


def values(kind: type[StrEnum]) -> tuple[str, ...]:
    """The values of an enum, in order: what an error message lists and a widget offers."""
    return tuple(m.value for m in kind)
