"""One eval case's outcome under each configuration: the typed rows of EvalReport.cases.

Their JSON (`to_dict`) is the `cases` list of `eval --json` and of saved runs; `from_dict` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


@dataclass(frozen=True)
class ConfigOutcome:
    """One case under one configuration: where the first expected entry ranked, and what the run did."""

    rank: int | None
    ranking: tuple[str, ...]
    category: str | None  # the L1 filter applied (None: unfiltered, or no L1)
    layer: str
    l1_status: str
    fallback: bool
    semantic_support: bool
    support_score: float | None = None
    support_lexical: float | None = None
    confidence: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigOutcome:
        """From its JSON (a saved run's), missing fields at their defaults."""
        return cls(
            data.get("rank"),
            tuple(data.get("ranking") or ()),
            data.get("category"),
            data.get("layer") or "",
            data.get("l1_status") or "",
            bool(data.get("fallback")),
            bool(data.get("semantic_support")),
            data.get("support_score"),
            data.get("support_lexical"),
            data.get("confidence"),
        )

    @property
    def rr(self) -> float:
        return 0.0 if self.rank is None else 1.0 / self.rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "rr": self.rr,
            "ranking": list(self.ranking),
            "category": self.category,
            "layer": self.layer,
            "l1_status": str(self.l1_status),
            "fallback": self.fallback,
            "semantic_support": self.semantic_support,
            "support_score": _rounded(self.support_score, 5),
            "support_lexical": _rounded(self.support_lexical, 4),
            "confidence": _rounded(self.confidence, 4),
        }


@dataclass(frozen=True)
class CaseResult:
    """One eval case: its query and expected entries, how L0 routed it, and its outcome per configuration."""

    id: str
    query: str
    expected: Mapping[str, int]
    domain: str | None
    l0_domains: tuple[str, ...]
    filter: str | None  # the L1 filter the L0 domains give (routing.category_filter)
    configs: Mapping[str, ConfigOutcome] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        """From its JSON (a saved run's, or a row built by hand)."""
        routing = data.get("routing") or {}
        return cls(
            str(data["id"]),
            str(data.get("query", "")),
            dict(data.get("expected") or {}),
            data.get("domain"),
            tuple(routing.get("l0_domains") or ()),
            routing.get("filter"),
            {name: ConfigOutcome.from_dict(run) for name, run in (data.get("configs") or {}).items()},
        )

    @property
    def layer(self) -> str | None:
        """The lookup configuration's layer, when it ran."""
        lookup = self.configs.get("lookup")
        return None if lookup is None else lookup.layer

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "expected": dict(self.expected),
            "domain": self.domain,
            "routing": {"l0_domains": list(self.l0_domains), "filter": self.filter},
            "layer": self.layer,
            "configs": {name: outcome.to_dict() for name, outcome in self.configs.items()},
        }
