"""The ranking metrics of an eval and their significance, through ranx: each configuration's figures, and the
paired tests between configurations (or between a run and a saved baseline)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.evals.configs import ConfigRun
    from retrieval.evals.sets import EvalSet

METRICS = {"hit@1": "hit_rate@1", "recall@5": "recall@5", "mrr@10": "mrr@10", "ndcg@10": "ndcg@10"}


def quiet_ranx() -> Any:
    """ranx, imported without the DeprecationWarnings its own source raises while it compiles (invalid escape
    sequences in its LaTeX report templates), which filled stderr of every eval run; other warnings stay."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"invalid escape sequence")
        warnings.filterwarnings("ignore", category=SyntaxWarning, message=r"invalid escape sequence")
        import ranx
    return ranx


SMALL_SAMPLE = 30
ALPHA = 0.05


def qrels_of(eval_set: EvalSet):
    """The set's answerable cases as ranx relevance judgments."""
    return quiet_ranx().Qrels({c.id: dict(c.expected) for c in eval_set.cases if c.answerable})


def ranking_run(rankings: Iterable[tuple[str, Sequence[str]]], name: str):
    """(case id, ranked entry ids) pairs as a ranx run: of n entries the first scores n, the last 1."""
    return quiet_ranx().Run(
        {case_id: {e: float(len(ranking) - i) for i, e in enumerate(ranking)} for case_id, ranking in rankings}, name=name
    )


def ranx_runs(eval_set: EvalSet, runs: Mapping[str, Sequence[ConfigRun]]):
    """The relevance judgments and one ranx run per configuration, over the answerable cases."""
    answerable = {c.id for c in eval_set.cases if c.answerable}
    return qrels_of(eval_set), {
        name: ranking_run(((r.case_id, r.ranking) for r in case_runs if r.case_id in answerable), name)
        for name, case_runs in runs.items()
    }


def paired_comparison(qrels, runs: Sequence[Any], *, stat_test: str = "student") -> dict[str, Any]:
    """ranx's comparison of `runs` on every metric (scores, and the p-value of every pair), as a dict."""
    return (
        quiet_ranx()
        .compare(qrels, runs=list(runs), metrics=list(METRICS.values()), stat_test=stat_test, max_p=ALPHA, make_comparable=True)
        .to_dict()
    )


def compute_metrics(qrels, ranx_runs: dict) -> dict[str, dict[str, float]]:
    evaluate = quiet_ranx().evaluate
    out = {}
    for name, run in ranx_runs.items():
        values = evaluate(qrels, run, list(METRICS.values()), make_comparable=True)
        out[name] = {short: float(values[long]) for short, long in METRICS.items()}
    return out


def compute_significance(qrels, ranx_runs: dict, *, stat_test: str = "student") -> dict[str, Any]:
    """Paired test between every two configurations, per metric: p-values and whether p < 0.05."""
    names = list(ranx_runs)
    if len(names) < 2:
        return {"stat_test": stat_test, "alpha": ALPHA, "pairs": []}
    report = paired_comparison(qrels, [ranx_runs[n] for n in names], stat_test=stat_test)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for short, long in METRICS.items():
                p = float(report[a]["comparisons"][b][long])
                pairs.append(
                    {
                        "a": a,
                        "b": b,
                        "metric": short,
                        "p_value": None if math.isnan(p) else p,
                        "significant": (not math.isnan(p)) and p < ALPHA,
                        "a_score": float(report[a]["scores"][long]),
                        "b_score": float(report[b]["scores"][long]),
                    }
                )
    return {"stat_test": stat_test, "alpha": ALPHA, "pairs": pairs}
