"""What the core reads of the settings: one frozen LookupOptions, built at the edge by `Settings.options()`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from retrieval.types.modes import LookupMode, MissingScore


@dataclass(frozen=True)
class LookupOptions:
    """The options of one lookup: its model, how L1 searches and fuses, the claim's threshold, the record's tag."""

    embedding_model: str
    search_mode: LookupMode
    top_k: int
    candidate_depth: int  # candidates each L1 query returns for the fusion (at least top_k)
    hybrid_alpha: float
    vector_weight: float
    lexical_weight: float
    l0_weight: float
    name_weight: float
    missing_score: MissingScore
    support_threshold: float | None  # None: the support model's fitted one
    l1_enabled: bool
    l1_timeout_s: float
    session_tag: str
    collection: str = ""  # the Weaviate collection (the corpus) L1 searches, recorded with each call

    def with_(self, **changes: Any) -> LookupOptions:
        return dataclasses.replace(self, **changes)


OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(LookupOptions))
