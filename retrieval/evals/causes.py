"""Every miss of an eval run by its cause (retrieval.core.miss_cause): counts per configuration, the table Evaluate
shows, and two runs' counts compared in words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from retrieval.core.miss_cause import CAUSES, Miss, MissCause

if TYPE_CHECKING:
    from retrieval.evals.cases import CaseResult

MISSES = "misses"  # the row of the table that counts every answerable case whose expected entry is not first


class CasesByConfig(Protocol):
    """What the cause counts read of an eval report: its cases and the configurations each ran."""

    @property
    def cases(self) -> Sequence[CaseResult]: ...

    @property
    def configs(self) -> Sequence[str]: ...


def counts(cases: Iterable[CaseResult], config: str) -> dict[str, int]:
    """Cause -> cases of one configuration (causes with none left out)."""
    found: Counter[str] = Counter()
    for case in cases:
        outcome = case.configs.get(config)
        if outcome is not None and outcome.miss is not None:
            found[str(outcome.miss.cause)] += 1
    return {str(c): found[str(c)] for c in CAUSES if found[str(c)]}


def counts_of_misses(misses: Iterable[Mapping[str, Any] | Miss | None]) -> dict[str, int]:
    """Cause -> count of a saved run's `miss` column (dicts, None where no miss)."""
    found: Counter[str] = Counter()
    for m in misses:
        if not isinstance(m, Miss | Mapping) or not m:  # None, or NaN in a run saved before causes were kept
            continue
        found[str(m.cause if isinstance(m, Miss) else MissCause(m["cause"]))] += 1
    return {str(c): found[str(c)] for c in CAUSES if found[str(c)]}


def cause_counts(report: CasesByConfig) -> dict[str, dict[str, int]]:
    """Configuration -> cause -> count, over the report's cases."""
    return {config: counts(report.cases, config) for config in report.configs}


def answerable_misses(by_cause: Mapping[str, int]) -> int:
    """The answerable cases missed: every cause but an unanswerable case answered."""
    return sum(n for c, n in by_cause.items() if c != MissCause.ANSWERED_UNANSWERABLE)


def cause_table(report: CasesByConfig) -> list[dict[str, Any]]:
    """One row per cause (its label, then each configuration's count), the causes no configuration has left out, and
    a last row of the answerable misses they sum to."""
    by_config = cause_counts(report)
    rows = []
    for cause in CAUSES:
        if any(by_config[c].get(str(cause)) for c in report.configs):
            rows.append({"cause": cause.label, **{c: by_config[c].get(str(cause), 0) for c in report.configs}})
    rows.append({"cause": MISSES, **{c: answerable_misses(by_config[c]) for c in report.configs}})
    return rows


def compare_causes(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """What changed from `before` to `after`, cause by cause: "3 fewer lost in the fusion", "2 more kept out by the
    filter"; nothing for a cause whose count stayed."""
    out = []
    for cause in CAUSES:
        change = after.get(str(cause), 0) - before.get(str(cause), 0)
        if change:
            out.append(f"{abs(change)} {'more' if change > 0 else 'fewer'} {cause.label}")
    return out
