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


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None: no test), in their order: the k-th smallest of m
    is multiplied by m − k + 1, kept monotone and at most 1. Rejecting where the adjusted p < alpha keeps the chance of
    any false "significant" in the family below alpha."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m, running = len(tested), 0.0
    out: list[float | None] = [None] * len(p_values)
    for k, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


def compute_significance(qrels, ranx_runs: dict, *, reference: str = "lookup", stat_test: str = "student") -> dict[str, Any]:
    """Paired tests of every configuration against `reference` (the first configuration when it did not run), per
    metric: the raw p-value, the Holm-adjusted one over the whole family of tests, and whether that one is below
    alpha. Only against the reference: every pair would be n(n−1)/2 × 4 tests, most of them of no question asked."""
    names = list(ranx_runs)
    reference = reference if reference in names else (names[0] if names else reference)
    head = {"stat_test": stat_test, "alpha": ALPHA, "reference": reference, "correction": "holm"}
    if len(names) < 2:
        return {**head, "tests": 0, "pairs": []}
    report = paired_comparison(qrels, [ranx_runs[n] for n in names], stat_test=stat_test)
    pairs = []
    for other in (n for n in names if n != reference):
        for short, long in METRICS.items():
            p = float(report[other]["comparisons"][reference][long])
            pairs.append(
                {
                    "a": other,
                    "b": reference,
                    "metric": short,
                    "p_value": None if math.isnan(p) else p,
                    "a_score": float(report[other]["scores"][long]),
                    "b_score": float(report[reference]["scores"][long]),
                }
            )
    for pair, adjusted in zip(pairs, holm([p["p_value"] for p in pairs]), strict=True):
        pair["p_holm"] = adjusted
        pair["significant"] = adjusted is not None and adjusted < ALPHA
    return {**head, "tests": len(pairs), "pairs": pairs}
