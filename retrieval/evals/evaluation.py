"""Run an eval set through the configurations on the same cases: the EvalReport of metrics, significance
(retrieval.evals.ranking_metrics), routing, support and latency figures, and each case's outcome."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import EVAL_SETTINGS, Settings
from retrieval.core.lookup import search_text
from retrieval.core.protocols import LookupServices
from retrieval.core.routing import category_filter
from retrieval.core.support import auc, support_model
from retrieval.errors import EvalSetError
from retrieval.evals.cases import CaseResult, ConfigOutcome
from retrieval.evals.causes import cause_counts
from retrieval.evals.configs import CONFIGS, DEPTH, ConfigRun, run_case
from retrieval.evals.coverage import COVERAGE_KEY, coverage_figures, coverage_share, unjudged_by_config
from retrieval.evals.ranking_metrics import METRICS, SMALL_SAMPLE, compute_metrics, compute_significance, ranx_runs
from retrieval.evals.reliability import reliability
from retrieval.evals.routing_metrics import RoutingObservation, confusion, filter_effect, routing_metrics
from retrieval.evals.sets import EvalSet
from retrieval.types.options import LookupOptions

# The routing and support figures of a configuration, in the order tables show them.
ROUTING_FIGURES = (
    "filter_applied_rate",
    "routing_accuracy",
    "filter_excluded_rate",
    "fallback_rate",
    "correct_supported_rate",
    "unanswerable_unsupported_rate",
)


@dataclass(frozen=True)
class EvalReport:
    eval_set: str
    run_tag: str
    created_at: str
    settings: dict[str, Any]
    configs: tuple[str, ...]
    metrics: dict[str, dict[str, float]]
    significance: dict[str, Any]
    routing: dict[str, dict[str, Any]]
    confusion: dict[str, dict[str, int]]
    latency: dict[str, dict[str, float | None]]
    cases: tuple[CaseResult, ...]
    warnings: list[str]
    filter_effect: dict[str, Any] = field(default_factory=dict)  # l1_filtered against l1_unfiltered, when both ran
    # per configuration with a support estimate: its reliability (evals.reliability), predicted against right top results
    calibration: dict[str, Any] = field(default_factory=dict)
    # judgment coverage (evals.coverage): per configuration, and for a set built from recorded calls; empty: unknown
    coverage: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # rows given as their JSON (a saved run's, or built by hand) become typed rows
        rows = tuple(c if isinstance(c, CaseResult) else CaseResult.from_dict(c) for c in self.cases)
        object.__setattr__(self, "cases", rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "eval_set": self.eval_set,
            "run_tag": self.run_tag,
            "created_at": self.created_at,
            "settings": self.settings,
            "configs": self.metrics,
            "significance": self.significance,
            "routing": self.routing,
            "confusion": self.confusion,
            "latency": self.latency,
            "cases": [{**c.to_dict(), "unjudged": unjudged_by_config(c)} for c in self.cases],
            "warnings": self.warnings,
            "filter_effect": self.filter_effect,
            "calibration": self.calibration,
            "coverage": self.coverage,
            "causes": cause_counts(self),
        }

    def metrics_table(self) -> list[dict[str, Any]]:
        """One row per configuration: its metrics, judgment coverage (None: unknown) and routing figures."""
        rows = []
        for name in self.configs:
            row = {"config": name, **{k: self.metrics[name][k] for k in METRICS}}
            row[COVERAGE_KEY] = coverage_share(self.coverage, name)
            r = self.routing.get(name, {})
            row.update({k: r.get(k) for k in ROUTING_FIGURES})
            rows.append(row)
        return rows


def _percentile(values: Sequence[float], q: float) -> float | None:
    return None if not values else float(np.percentile(np.asarray(values, dtype=float), q))


def _outcome(r: ConfigRun, expected: dict[str, int]) -> ConfigOutcome:
    return ConfigOutcome(**r.figures(), rank=r.rank_of(expected))


def run_eval(
    eval_set: EvalSet,
    services: LookupServices,
    settings: Settings,
    *,
    configs: Sequence[str] = CONFIGS,
    progress: Callable[[int, int], None] | None = None,
    stat_test: str = "student",
    run_tag: str | None = None,
) -> EvalReport:
    """Every case through every configuration. Query embeddings are computed once and shared."""
    _check(eval_set, services, configs)
    settings = settings.with_(top_k=max(DEPTH, settings.top_k))
    run_tag = run_tag or f"eval-{eval_set.name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
    runs = _run_cases(eval_set, services, settings.options(), configs, run_tag, progress)
    answerable = sum(c.answerable for c in eval_set.cases)
    qrels, per_config = ranx_runs(eval_set, runs) if answerable else (None, {})
    warnings = []
    if answerable < SMALL_SAMPLE:
        warnings.append(f"only {answerable} answerable cases: significance tests are unreliable below {SMALL_SAMPLE}")
    metrics = compute_metrics(qrels, per_config) if answerable else {c: {m: float("nan") for m in METRICS} for c in configs}
    reference = "lookup" if "lookup" in configs else configs[0]  # named in the JSON, the legend and the report alike
    significance = (
        compute_significance(qrels, per_config, reference=reference, stat_test=stat_test)
        if answerable
        else {"reference": reference, "pairs": []}
    )
    cases_by_id = {c.id: c for c in eval_set.cases}
    routing, latency, calibration = _figures(runs, cases_by_id, {e.entry_id: e.domain for e in services.l0.entries.values()})
    conf = confusion(
        RoutingObservation(r.case_id, cases_by_id[r.case_id].domain, (), r.category)
        for r in runs.get("l1_filtered") or runs.get("lookup") or []
    )
    cases_out = _case_results(eval_set, services, runs, configs)
    in_folder = Path(eval_set.path).resolve().parent == Path(settings.judged_sets_dir).resolve()
    coverage = coverage_figures(cases_out, configs, judged=eval_set.judged, in_judgments_folder=in_folder)
    effect = {}
    if {"l1_unfiltered", "l1_filtered"} <= set(configs):
        effect = filter_effect(
            (c.id, c.configs["l1_filtered"].category is not None, c.configs["l1_unfiltered"].rr, c.configs["l1_filtered"].rr)
            for c in cases_out
            if c.expected
        )
    return EvalReport(
        eval_set=eval_set.name,
        run_tag=run_tag,
        created_at=datetime.now(UTC).isoformat(),
        settings={
            **{name: getattr(settings, name) for name in EVAL_SETTINGS},
            "support_threshold": support_model(settings.embedding_model).cut(settings.support_threshold),
            "collection": settings.collection,
            "cases": len(eval_set.cases),
            "answerable": answerable,
        },
        configs=tuple(configs),
        metrics=metrics,
        significance=significance,
        routing=routing,
        confusion=conf,
        latency=latency,
        cases=tuple(cases_out),
        warnings=warnings,
        filter_effect=effect,
        calibration=calibration,
        coverage=coverage,
    )


def _check(eval_set: EvalSet, services: LookupServices, configs: Sequence[str]) -> None:
    """Refuse an unknown configuration, or one that needs an L1 that is not there; prime the query embeddings."""
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise EvalSetError(f"unknown configuration(s): {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    if any(c != "l0_only" for c in configs):
        if services.store is None or services.embedder is None:
            raise EvalSetError(
                f"configurations {', '.join(c for c in configs if c != 'l0_only')} need L1, which is unavailable: "
                f"{services.l1_unavailable or 'not connected'}"
            )
        services.embedder.prime([c.query for c in eval_set.cases])


def _run_cases(
    eval_set: EvalSet,
    services: LookupServices,
    options: LookupOptions,
    configs: Sequence[str],
    run_tag: str,
    progress: Callable[[int, int], None] | None,
) -> dict[str, list[ConfigRun]]:
    runs: dict[str, list[ConfigRun]] = {c: [] for c in configs}
    total, done = len(eval_set.cases) * len(configs), 0
    for case in eval_set.cases:
        for config in configs:
            runs[config].append(run_case(case, config, services, options, run_tag))
            done += 1
            if progress:
                progress(done, total)
    return runs


def _figures(
    runs: dict[str, list[ConfigRun]], cases_by_id: dict[str, Any], entry_domains: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, float | None]], dict[str, Any]]:
    """Per configuration: its routing and support figures, its stages' latency, and its estimate's reliability."""
    routing: dict[str, dict[str, Any]] = {}
    latency: dict[str, dict[str, float | None]] = {}
    calibration: dict[str, Any] = {}
    for config, case_runs in runs.items():
        obs = [
            RoutingObservation(
                r.case_id,
                cases_by_id[r.case_id].domain,
                tuple(e for e, g in cases_by_id[r.case_id].expected.items() if g > 0),
                r.category,
                r.fallback,
                r.semantic_support,
                r.ranking[0] if r.ranking else None,
            )
            for r in case_runs
        ]
        routing[config] = routing_metrics(obs, entry_domains)
        # how well the support estimate tells right top results from wrong and unanswerable ones
        scored = [(r.confidence, r.rank_of(cases_by_id[r.case_id].expected) == 1) for r in case_runs]
        estimated = [(c, ok) for c, ok in scored if c is not None]
        routing[config]["support_auc"] = auc([c for c, _ in estimated], [ok for _, ok in estimated])
        rel = reliability([c for c, _ in estimated], [ok for _, ok in estimated])
        if rel is not None:
            calibration[config] = {**rel.to_dict(), "estimated_cases": len(estimated), "fit": _fit_of(case_runs)}
        stages = sorted({s for r in case_runs for s in r.timings_ms})
        latency[config] = {
            f"{s}_{name}": _percentile([r.timings_ms[s] for r in case_runs if s in r.timings_ms], q)
            for s in stages
            for name, q in (("p50", 50), ("p95", 95))
        }
    return routing, latency, calibration


def _case_results(
    eval_set: EvalSet, services: LookupServices, runs: dict[str, list[ConfigRun]], configs: Sequence[str]
) -> list[CaseResult]:
    out: list[CaseResult] = []
    for i, case in enumerate(eval_set.cases):
        per = {config: _outcome(runs[config][i], case.expected) for config in configs}
        l0_domains = services.l0.match(search_text(case.query)).domains
        out.append(
            CaseResult(
                case.id,
                case.query,
                case.expected,
                case.domain,
                tuple(l0_domains),
                category_filter(l0_domains),
                per,
                case.not_relevant,
                eval_set.complete,
                case.invocation,
            )
        )
    return out


def _fit_of(runs: Sequence[ConfigRun]) -> dict[str, Any] | None:
    """Which support fit the runs' estimates came from (the first that says)."""
    return next((r.fit for r in runs if r.fit is not None), None)


def support_points(report: EvalReport, config: str = "lookup") -> list[dict[str, Any]]:
    """Per case of one configuration: its top result's support score (similarity) and BM25F score, whether
    it claimed support, and the outcome: right (top result expected), wrong, or unanswerable (nothing expected)."""
    out = []
    for case in report.cases:
        outcome_of = case.configs.get(config)
        if outcome_of is None:
            continue
        run = outcome_of.to_dict()  # its figures as recorded (rounded)
        if not case.expected:
            outcome = "unanswerable"
        elif outcome_of.rank == 1:
            outcome = "right"
        else:
            outcome = "wrong"
        out.append(
            {
                "case": case.id,
                "outcome": outcome,
                "support_score": run["support_score"],
                "support_lexical": run["support_lexical"],
                "confidence": run["confidence"],
                "semantic_support": outcome_of.semantic_support,
            }
        )
    return out
