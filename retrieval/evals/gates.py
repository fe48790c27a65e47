"""The eval command's gates: metric thresholds (`--min CONFIG:METRIC=VALUE`) and no significant regression
against a saved baseline run (`--baseline`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrieval.errors import EvalSetError
from retrieval.evals.configs import CONFIGS
from retrieval.evals.ranking_metrics import ALPHA, METRICS, paired_comparison, qrels_of, ranking_run

if TYPE_CHECKING:
    from retrieval.evals.evaluation import EvalReport
    from retrieval.evals.sets import EvalSet


def parse_threshold(text: str) -> tuple[str, str, float]:
    """'lookup:mrr@10=0.9' -> ('lookup', 'mrr@10', 0.9)."""
    try:
        left, value = text.split("=", 1)
        config, metric = left.split(":", 1)
        number = float(value)
    except ValueError as exc:
        raise EvalSetError(f"--min '{text}': expected CONFIG:METRIC=VALUE, e.g. lookup:mrr@10=0.9") from exc
    if config not in CONFIGS or metric not in METRICS:
        raise EvalSetError(f"--min '{text}': config must be one of {', '.join(CONFIGS)} and metric one of {', '.join(METRICS)}")
    return config, metric, number


def check_gates(
    report: EvalReport, thresholds: Sequence[str], baseline: dict[str, Any] | None = None, eval_set: EvalSet | None = None
) -> list[str]:
    """Failures: thresholds not met, and configurations significantly worse than a saved baseline run."""
    failures = []
    for text in thresholds:
        config, metric, want = parse_threshold(text)
        if config not in report.metrics:
            failures.append(f"{text}: configuration {config} was not run")
            continue
        got = report.metrics[config][metric]
        if not got >= want:
            failures.append(f"{config} {metric} = {got:.4f} is below the threshold {want}")
    if baseline is not None and eval_set is not None:
        failures.extend(baseline_regressions(report, baseline, eval_set))
    return failures


def baseline_regressions(report: EvalReport, baseline: dict[str, Any], eval_set: EvalSet) -> list[str]:
    """The metrics of each configuration that fell significantly (paired t-test) from the baseline's."""
    answerable = {c.id for c in eval_set.cases if c.answerable}
    qrels = qrels_of(eval_set)
    failures = []

    def run_from(cases: list[dict[str, Any]], config: str, name: str):
        rankings = [
            (case["id"], case["configs"][config]["ranking"])
            for case in cases
            if case["id"] in answerable and config in case.get("configs", {})
        ]
        return ranking_run(rankings, name) if rankings else None

    for config in report.configs:
        old = run_from(baseline.get("cases", []), config, "baseline")
        new = run_from([c.to_dict() for c in report.cases], config, "current")
        if old is None or new is None:
            continue
        cmp = paired_comparison(qrels, [old, new])
        for short, long in METRICS.items():
            p = float(cmp["current"]["comparisons"]["baseline"][long])
            before, after = cmp["baseline"]["scores"][long], cmp["current"]["scores"][long]
            if after < before and not math.isnan(p) and p < ALPHA:
                failures.append(f"{config} {short} fell from {before:.4f} to {after:.4f} against the baseline (p = {p:.4f})")
    return failures
