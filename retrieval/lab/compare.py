"""Compare two saved runs: metric deltas with a paired t-test on the cases both share, and which cases moved.
Per-case values come from ranx (as the eval scores), recomputed from each run's stored rankings; the test from scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from retrieval.errors import EvalSetError
from retrieval.evals.causes import compare_causes, counts_of_misses
from retrieval.evals.ranking_metrics import ALPHA, METRICS, SMALL_SAMPLE
from retrieval.lab.run_summary import RunSummary
from retrieval.lab.runs import RunStore

STAT_TEST = "paired t-test (scipy.stats.ttest_rel)"


@dataclass(frozen=True)
class MetricDelta:
    """One metric over the shared cases: A's and B's means, B − A with its 95% interval, the paired test."""

    metric: str
    a: float
    b: float
    delta: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    effect_size: float | None  # Cohen's d of the paired differences: mean / standard deviation
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "a": self.a,
            "b": self.b,
            "delta": self.delta,
            "ci95": [self.ci_low, self.ci_high],
            "p_value": self.p_value,
            "effect_size": self.effect_size,
            "significant": self.significant,
        }


@dataclass(frozen=True)
class CaseChange:
    """A shared case whose value of the chosen metric differs between the runs."""

    case_id: str
    query: str
    rank_before: int | None
    rank_after: int | None
    before: float
    after: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "query": self.query,
            "rank_before": self.rank_before,
            "rank_after": self.rank_after,
            "before": self.before,
            "after": self.after,
        }


NOT_FOUND = "not found"  # a case whose expected entry is not in a run's top 10


def rank_text(rank: int | None) -> str:
    """A case's rank in one run as people read it: the number, or NOT_FOUND (never "None")."""
    return NOT_FOUND if rank is None or rank != rank else str(int(rank))


@dataclass(frozen=True)
class RunComparison:
    run_a: RunSummary
    run_b: RunSummary
    config: str
    metric: str  # the chosen one: improved/regressed and the regression verdict are about it
    shared_cases: int
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    metrics: tuple[MetricDelta, ...]
    improved: tuple[CaseChange, ...]
    regressed: tuple[CaseChange, ...]
    unchanged: int
    settings_diff: dict[str, tuple[Any, Any]]
    warnings: tuple[str, ...]
    # cause -> misses of A and of B (evals.causes; empty for a run saved before causes were kept)
    causes_a: dict[str, int] = field(default_factory=dict)
    causes_b: dict[str, int] = field(default_factory=dict)

    @property
    def cause_changes(self) -> list[str]:
        """B's misses against A's, cause by cause, in words ("3 fewer lost in the fusion")."""
        return compare_causes(self.causes_a, self.causes_b)

    @property
    def models(self) -> tuple[str | None, str | None]:
        """The embedding model of A and of B; None for a run saved before the model was a setting."""
        return self.run_a.embedding_model, self.run_b.embedding_model

    @property
    def chosen(self) -> MetricDelta:
        return next(m for m in self.metrics if m.metric == self.metric)

    @property
    def regression(self) -> bool:
        """B is significantly worse than A on the chosen metric."""
        return self.chosen.delta < 0 and self.chosen.significant

    @property
    def verdict(self) -> str:
        """B against A on the chosen metric, in words."""
        if self.regression:
            return "significantly worse"
        return "significantly better" if self.chosen.significant else "not significantly different"

    def to_dict(self) -> dict[str, Any]:
        chosen = self.chosen
        return {
            "run_a": self.run_a.to_dict(),
            "run_b": self.run_b.to_dict(),
            "config": self.config,
            "metric": self.metric,
            "embedding_models": list(self.models),
            "stat_test": STAT_TEST,
            "alpha": ALPHA,
            "shared_cases": self.shared_cases,
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "delta": chosen.delta,
            "p_value": chosen.p_value,
            "effect_size": chosen.effect_size,
            "regression": self.regression,
            "metrics": {m.metric: m.to_dict() for m in self.metrics},
            "improved": [c.to_dict() for c in self.improved],
            "regressed": [c.to_dict() for c in self.regressed],
            "unchanged": self.unchanged,
            "settings_diff": {k: list(v) for k, v in self.settings_diff.items()},
            "warning": self.warnings[0] if self.warnings else None,
            "warnings": list(self.warnings),
            "causes": {"a": self.causes_a, "b": self.causes_b, "changes": self.cause_changes},
        }


def _none_if_nan(value: float) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else float(value)


def paired_delta(metric: str, a: np.ndarray, b: np.ndarray) -> MetricDelta:
    """B − A over paired per-case values: means, a 95% t-interval of the mean difference, the paired t-test's
    two-sided p-value and Cohen's d_z. With no variation in the differences there is no test (p = None)."""
    from scipy import stats

    n = len(a)
    diff = b - a
    mean_a = float(a.mean()) if n else float("nan")
    mean_b = float(b.mean()) if n else float("nan")
    delta = float(diff.mean()) if n else float("nan")
    if n < 2 or float(np.std(diff, ddof=1)) == 0.0:
        exact = delta if n and not math.isnan(delta) else None
        return MetricDelta(metric, mean_a, mean_b, delta, exact, exact, None, None, False)
    sd = float(np.std(diff, ddof=1))
    half = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * sd / math.sqrt(n)
    p = _none_if_nan(float(stats.ttest_rel(b, a).pvalue))
    return MetricDelta(metric, mean_a, mean_b, delta, delta - half, delta + half, p, delta / sd, p is not None and p < ALPHA)


def per_case_values(frame, metrics: tuple[str, ...] = tuple(METRICS)) -> dict[str, dict[str, float]]:
    """{case_id: {metric: value}} for the answerable cases of one run's per-case rows, scored by ranx."""
    from retrieval.evals.ranking_metrics import quiet_ranx

    ranx = quiet_ranx()
    Qrels, Run, evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    answerable = frame[frame["expected"].map(bool)]
    if answerable.empty:
        return {}
    qrels = Qrels({row.case_id: {k: int(v) for k, v in row.expected.items()} for row in answerable.itertuples()})
    scores = {
        row.case_id: {entry: float(len(row.top_entries) - i) for i, entry in enumerate(row.top_entries)}
        for row in answerable.itertuples()
        if row.top_entries
    }
    out: dict[str, dict[str, float]] = {cid: {} for cid in answerable["case_id"]}
    if not scores:
        return {cid: dict.fromkeys(metrics, 0.0) for cid in out}
    run = Run(scores)
    evaluate(qrels, run, [METRICS[m] for m in metrics], make_comparable=True)
    for m in metrics:
        for cid, value in run.scores[METRICS[m]].items():
            out[str(cid)][m] = float(value)
    return out


def default_pair(runs: Sequence[RunSummary], config: str | None = None) -> tuple[str, str] | None:
    """(A, B): the two latest runs of one eval set, the set of the newest run that has another (`runs` newest
    first), both having run `config` when named. None when no such pair: a comparison across sets shares no case."""
    runs = [r for r in runs if config is None or config in r.configs]
    for newest in runs:
        older = next((r for r in runs if r.eval_set == newest.eval_set and r.run_id != newest.run_id), None)
        if older is not None:
            return older.run_id, newest.run_id
    return None


def compare_runs(store: RunStore, run_a: str, run_b: str, *, config: str = "lookup", metric: str = "mrr@10") -> RunComparison:
    """B against A on one configuration. Raises RunNotFound for an unknown id, EvalSetError for a
    configuration one of the runs did not run or an unknown metric."""
    if metric not in METRICS:
        raise EvalSetError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    a, b = store.get(run_a), store.get(run_b)
    for summary in (a, b):
        if config not in summary.configs:
            raise EvalSetError(
                f"configuration {config!r} is not in run {summary.run_id} (it ran {', '.join(summary.configs) or 'none'})"
            )
    if a.run_id == b.run_id:
        raise EvalSetError(f"run {a.run_id} is both A and B: pick two different runs to compare")
    cases_a, cases_b = store.cases(a.run_id, config), store.cases(b.run_id, config)
    values_a, values_b = per_case_values(cases_a), per_case_values(cases_b)
    shared = sorted(set(values_a) & set(values_b))
    deltas = tuple(
        paired_delta(m, np.array([values_a[c][m] for c in shared]), np.array([values_b[c][m] for c in shared])) for m in METRICS
    )
    rank_a = dict(zip(cases_a["case_id"], cases_a["rank"], strict=True))
    rank_b = dict(zip(cases_b["case_id"], cases_b["rank"], strict=True))
    queries = dict(zip(cases_b["case_id"], cases_b["query"], strict=True))
    changes = [
        CaseChange(c, str(queries[c]), _rank(rank_a[c]), _rank(rank_b[c]), values_a[c][metric], values_b[c][metric])
        for c in shared
        if values_a[c][metric] != values_b[c][metric]
    ]
    improved = sorted((x for x in changes if x.after > x.before), key=lambda x: (x.before - x.after, x.case_id))
    regressed = sorted((x for x in changes if x.after < x.before), key=lambda x: (x.after - x.before, x.case_id))
    warnings = []
    if len(shared) < SMALL_SAMPLE:
        warnings.append(f"only {len(shared)} shared cases: the paired test is unreliable below {SMALL_SAMPLE}")
    if a.eval_set != b.eval_set:
        warnings.append(f"the runs are of different eval sets ({a.eval_set}, {b.eval_set}): only cases of the same id are paired")
    elif a.set_hash != b.set_hash:
        warnings.append(f"the eval set {a.eval_set} changed between the runs: only cases with the same id are paired")
    diff = {
        k: (a.settings.get(k), b.settings.get(k))
        for k in dict.fromkeys([*a.settings, *b.settings])
        if a.settings.get(k) != b.settings.get(k)
    }
    return RunComparison(
        run_a=a,
        run_b=b,
        config=config,
        metric=metric,
        shared_cases=len(shared),
        only_in_a=tuple(sorted(set(values_a) - set(values_b))),
        only_in_b=tuple(sorted(set(values_b) - set(values_a))),
        metrics=deltas,
        improved=tuple(improved),
        regressed=tuple(regressed),
        unchanged=len(shared) - len(changes),
        settings_diff=diff,
        warnings=tuple(warnings),
        causes_a=_causes(cases_a),
        causes_b=_causes(cases_b),
    )


def _causes(frame: pd.DataFrame) -> dict[str, int]:
    """Cause -> misses of one run's cases (none for a run saved before causes were kept)."""
    return counts_of_misses(frame["miss"]) if "miss" in frame else {}


def _rank(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)
