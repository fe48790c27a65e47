"""Judgment coverage: the share of a run's top-k results that carry a judgment (a person said whether each is
relevant), per configuration, and how much of a set built from recorded calls was judged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.evals.cases import CaseResult
from retrieval.evals.configs import DEPTH

COVERAGE_KEY = f"judged@{DEPTH}"  # its column in the metrics table and in a saved run's metrics
UNJUDGED = "unjudged"  # how a result without a judgment is marked
COVERAGE_MEANING = (
    f"share of the top-{DEPTH} results that carry a judgment (listed by the case as relevant or not, or judged by the "
    "set's declaration); the metrics count an unjudged result as not relevant"
)


@dataclass(frozen=True)
class Coverage:
    """Of `results` results in the top-k of the cases, `judged` carry a judgment."""

    judged: int
    results: int

    @property
    def share(self) -> float | None:
        """None when there were no results to judge."""
        return self.judged / self.results if self.results else None

    def to_dict(self) -> dict[str, Any]:
        share = self.share
        return {"judged": self.judged, "results": self.results, "share": None if share is None else round(share, 4)}


def coverage_of(cases: Iterable[CaseResult], config: str, k: int = DEPTH) -> Coverage:
    """The coverage of one configuration's top-k over the cases."""
    judged = results = 0
    for case in cases:
        outcome = case.configs.get(config)
        if outcome is None:
            continue
        top = outcome.ranking[:k]
        results += len(top)
        judged += sum(1 for e in top if case.judged(e))
    return Coverage(judged, results)


def coverage_figures(
    cases: Sequence[CaseResult], configs: Sequence[str], *, judged: str, in_judgments_folder: bool
) -> dict[str, Any]:
    """A report's coverage: per configuration; and, for a set built from recorded calls (a case names the call it
    was judged from, or the set is in the judgments folder), the coverage of those cases under the reference."""
    out: dict[str, Any] = {
        "k": DEPTH,
        "judged": judged,
        "configs": {c: coverage_of(cases, c).to_dict() for c in configs},
    }
    from_calls = [c for c in cases if c.invocation]
    if from_calls or in_judgments_folder:
        reference = "lookup" if "lookup" in configs else configs[0]
        of = from_calls or list(cases)
        out["traffic"] = {
            "cases": len(cases),
            "from_calls": len(from_calls),
            "config": reference,
            **coverage_of(of, reference).to_dict(),
        }
    return out


def coverage_share(coverage: Mapping[str, Any], config: str) -> float | None:
    """One configuration's share; None when unknown (a report or saved run from before coverage was measured)."""
    return ((coverage.get("configs") or {}).get(config) or {}).get("share")


def traffic_sentence(coverage: Mapping[str, Any]) -> str | None:
    """How much of a set built from recorded calls was judged, in a sentence; None for a curated set."""
    traffic = coverage.get("traffic")
    if not traffic:
        return None
    share = traffic.get("share")
    figure = "–" if share is None else f"{share:.0%}"
    of = f"{traffic['judged']} of {traffic['results']} results judged under {traffic['config']}"
    k = coverage.get("k", DEPTH)
    if traffic["from_calls"]:
        return (
            f"{traffic['from_calls']} of its {traffic['cases']} cases were judged from recorded calls; "
            f"judgment coverage {figure} of their top-{k} ({of})."
        )
    return (
        f"A set judged in the app: none of its {traffic['cases']} cases names a recorded call; "
        f"judgment coverage {figure} of their top-{k} ({of})."
    )


def unjudged_by_config(case: CaseResult, k: int = DEPTH) -> dict[str, list[str]]:
    """Per configuration, the entries of its top-k the case carries no judgment for."""
    return {config: case.unjudged(config, k) for config in case.configs}
