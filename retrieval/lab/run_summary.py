"""A saved eval run's summary row (RunSummary), and the history table of many (`history_rows`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from retrieval.config import EVAL_SETTINGS
from retrieval.evals.coverage import COVERAGE_KEY


@dataclass(frozen=True)
class RunSummary:
    """One saved run: what ran (set, its content hash, corpus, settings, code) and its metrics per configuration."""

    run_id: str
    created_at: str  # ISO 8601, UTC
    eval_set: str
    set_hash: str
    set_path: str | None
    corpus: str | None
    collection: str | None
    settings: dict[str, Any]
    code_version: str | None
    source: str | None
    configs: tuple[str, ...]
    metrics: dict[str, dict[str, float | None]]
    cases: int
    answerable: int

    def judged_share(self, config: str = "lookup") -> float | None:
        """One configuration's judgment coverage; None for a run saved before it was measured (unknown)."""
        return (self.metrics.get(config) or {}).get(COVERAGE_KEY)

    @property
    def embedding_model(self) -> str | None:
        """The model the run embedded with; None for a run saved before the model was a setting."""
        value = self.settings.get("embedding_model")
        return str(value) if value else None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["configs"] = list(self.configs)
        out["embedding_model"] = self.embedding_model
        out["set"] = self.eval_set
        out["time"] = self.created_at
        return out


NO_MODEL = "–"  # the model of a run saved before the model was a setting
HISTORY_SETTINGS = EVAL_SETTINGS  # the retrieval-quality settings of a run, the model first
# judged@10 last: None for a run saved before judgment coverage was measured (unknown)
HISTORY_METRICS = ("mrr@10", "hit@1", "recall@5", "ndcg@10", "correct_supported_rate", COVERAGE_KEY)


def history_rows(runs: list[RunSummary], config: str = "lookup") -> list[dict[str, Any]]:
    """One row per run for a history table or a trend chart: when, what, one configuration's metrics (first: what a
    reader compares), then the settings and where it ran."""
    rows = []
    for run in runs:
        metrics = run.metrics.get(config) or {}
        rows.append(
            {
                "run_id": run.run_id,
                "time": run.created_at,
                "set": run.eval_set,
                **{m: metrics.get(m) for m in HISTORY_METRICS},
                **{k: run.settings.get(k) for k in HISTORY_SETTINGS},
                "embedding_model": run.embedding_model or NO_MODEL,
                "collection": run.collection,
                "cases": run.cases,
                "code_version": run.code_version,
                "source": run.source,
            }
        )
    return rows


def shared_settings(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings (HISTORY_SETTINGS) every one of two or more history rows has alike: said once, not as a column."""
    if len(rows) < 2:
        return {}
    return {k: rows[0].get(k) for k in HISTORY_SETTINGS if all(r.get(k) == rows[0].get(k) for r in rows)}
