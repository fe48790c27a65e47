"""Saved eval runs made by hand for the lab's tests: a tiny report, saved at a given minute, and one from before the
model was a setting."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import duckdb

from retrieval.evals.evaluation import EvalReport
from retrieval.evals.sets import EvalCase, EvalSet
from retrieval.lab.runs import RunStore


def forget_model(db: Path, run_id: str) -> None:
    """Make a saved run look like one saved before the model was a setting: no embedding_model in its settings."""
    with duckdb.connect(str(db)) as con:
        (stored,) = con.execute("SELECT settings FROM eval_run WHERE run_id = ?", [run_id]).fetchone()
        settings = json.loads(stored)
        settings.pop("embedding_model")
        con.execute("UPDATE eval_run SET settings = ? WHERE run_id = ?", [json.dumps(settings), run_id])


def saved_at(store: RunStore, minute: int, ranks: dict[str, int | None], settings, name: str = "tiny", *, config: str = "lookup"):
    """A tiny run of one configuration saved as made at 10:<minute>, so the runs sort by time whatever their ids."""
    report, eval_set = tiny_report(ranks)
    if config != "lookup":
        cases = [{**c.to_dict(), "configs": {config: c.configs["lookup"].to_dict()}} for c in report.cases]
        report = replace(report, configs=(config,), metrics={config: report.metrics["lookup"]}, cases=cases)
    return store.save(replace(report, created_at=f"2026-12-01T10:{minute:02d}:00+00:00"), replace(eval_set, name=name), settings)


def tiny_report(ranks: dict[str, int | None], *, unanswerable: bool = True) -> tuple[EvalReport, EvalSet]:
    """An eval report for config lookup whose case `cN` expects `eN`, found at the given rank among fillers."""
    cases, out = [], []
    for case_id, rank in ranks.items():
        want = "e" + case_id[1:]
        ranking = [f"x{i}" for i in range(1, 11)]
        if rank is not None:
            ranking[rank - 1] = want
        cases.append(EvalCase(case_id, f"query {case_id}", {want: 1}))
        out.append((case_id, {want: 1}, ranking, rank))
    if unanswerable:
        cases.append(EvalCase("u1", "query u1", {}))
        out.append(("u1", {}, [f"x{i}" for i in range(1, 11)], None))
    report_cases = [
        {
            "id": cid,
            "query": f"query {cid}",
            "expected": expected,
            "domain": None,
            "routing": {"l0_domains": [], "filter": None},
            "layer": "L0+L1",
            "configs": {
                "lookup": {
                    "rank": rank,
                    "rr": 0.0 if rank is None else 1 / rank,
                    "ranking": ranking,
                    "category": None,
                    "layer": "L0+L1",
                    "l1_status": "ok",
                    "fallback": False,
                    "semantic_support": True,
                    "support_score": 0.5,
                }
            },
        }
        for cid, expected, ranking, rank in out
    ]
    metrics = {"lookup": {"hit@1": 0.0, "recall@5": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}}
    report = EvalReport("tiny", "tag", "2026-12-01T10:00:00+00:00", {}, ("lookup",), metrics, {}, {}, {}, {}, report_cases, [])
    return report, EvalSet("tiny", "", "tiny.yaml", None, tuple(cases))
