"""One eval case's outcome under each configuration: the typed rows of EvalReport.cases.

Their JSON (`to_dict`) is the `cases` list of `eval --json` and of saved runs; `from_dict` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from retrieval.core.miss_cause import Miss
from retrieval.types.modes import L1Status, Layer


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


@dataclass(frozen=True)
class RunFigures:
    """What one configuration did for one case: its ranking, the filter L1 ran under (None: unfiltered, or no L1),
    the layers that answered, what L1 did, and what was claimed of the top result. The one set of fields of a
    configuration's run (ConfigRun, as it ran) and of its outcome in a report (ConfigOutcome, with the rank)."""

    ranking: tuple[str, ...]
    category: str | None
    layer: Layer
    l1_status: L1Status
    fallback: bool
    semantic_support: bool
    support_score: float | None = None  # cosine similarity of the query to the top result's best chunk
    support_lexical: float | None = None  # the top result's BM25F score (None: not a BM25F hit, or no BM25F query)
    confidence: float | None = None  # the support estimate: the chance that the top result is right
    miss: Miss | None = None  # why no expected entry is first (or why a case with no answer got one); None: no miss

    def figures(self) -> dict[str, Any]:
        """The fields of RunFigures, to build another kind of row from this one."""
        return {f.name: getattr(self, f.name) for f in fields(RunFigures)}


@dataclass(frozen=True)
class ConfigOutcome(RunFigures):
    """One case under one configuration in a report: its run's figures and where the first expected entry ranked."""

    rank: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigOutcome:
        """From its JSON (a saved run's), missing fields at their defaults."""
        return cls(
            ranking=tuple(data.get("ranking") or ()),
            category=data.get("category"),
            layer=Layer(data.get("layer") or Layer.NONE),
            l1_status=L1Status(data.get("l1_status") or L1Status.DISABLED),
            fallback=bool(data.get("fallback")),
            semantic_support=bool(data.get("semantic_support")),
            support_score=data.get("support_score"),
            support_lexical=data.get("support_lexical"),
            confidence=data.get("confidence"),
            miss=Miss.from_dict(data["miss"]) if data.get("miss") else None,
            rank=data.get("rank"),
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
            "layer": str(self.layer),
            "l1_status": str(self.l1_status),
            "fallback": self.fallback,
            "semantic_support": self.semantic_support,
            "support_score": _rounded(self.support_score, 5),
            "support_lexical": _rounded(self.support_lexical, 4),
            "confidence": _rounded(self.confidence, 4),
            "miss": None if self.miss is None else self.miss.to_dict(),
        }


@dataclass(frozen=True)
class CaseResult:
    """One eval case: its query and expected entries, how L0 routed it, its outcome per configuration, and what
    else a person judged (entries judged not relevant; `complete`: every entry not listed is judged not relevant)."""

    id: str
    query: str
    expected: Mapping[str, int]
    domain: str | None
    l0_domains: tuple[str, ...]
    filter: str | None  # the L1 filter the L0 domains give (routing.category_filter)
    configs: Mapping[str, ConfigOutcome] = field(default_factory=dict)
    not_relevant: tuple[str, ...] = ()
    complete: bool = False  # the set says `judged: complete`
    invocation: str | None = None  # the recorded call the case was judged from

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
            tuple(data.get("not_relevant") or ()),
            bool(data.get("complete")),
            data.get("invocation"),
        )

    def judged(self, entry_id: str) -> bool:
        """Whether a person said if the entry is relevant: listed by the case, or every entry is (a case with no
        right answer says no entry answers it; a complete set judges every entry it does not list not relevant)."""
        return self.complete or not self.expected or entry_id in self.expected or entry_id in self.not_relevant

    def unjudged(self, config: str, k: int) -> list[str]:
        """The entries of one configuration's top-k that carry no judgment."""
        outcome = self.configs.get(config)
        return [] if outcome is None else [e for e in outcome.ranking[:k] if not self.judged(e)]

    @property
    def layer(self) -> Layer | None:
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
            "layer": None if self.layer is None else str(self.layer),
            "configs": {name: outcome.to_dict() for name, outcome in self.configs.items()},
            "not_relevant": list(self.not_relevant),
            "complete": self.complete,
            "invocation": self.invocation,
        }
