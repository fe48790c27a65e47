"""Saved eval runs: every run of an eval set as an `eval_run` row and its cases as `eval_run_case` rows, in
the DuckDB file the invocations use (opened for a moment, with retry on the lock, like the invocation store)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pandas as pd

from retrieval.config import Settings, db_budget
from retrieval.errors import RunNotFound, StoreError
from retrieval.evals.evaluation import EvalReport
from retrieval.evals.sets import EvalSet
from retrieval.lab.run_provenance import code_version, new_run_id, run_settings, set_hash
from retrieval.lab.run_summary import HISTORY_METRICS, NO_MODEL, RunSummary, history_rows, shared_settings
from retrieval.records.db_budget import connect_retrying

# RunSummary and its history table live in run_summary; importers of this module find them here too.
__all__ = ["HISTORY_METRICS", "NO_MODEL", "SCHEMA", "RunStore", "RunSummary", "history_rows", "shared_settings"]

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS eval_run (
    run_id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    eval_set VARCHAR NOT NULL,
    set_hash VARCHAR NOT NULL,
    set_path VARCHAR,
    corpus VARCHAR,
    collection VARCHAR,
    settings JSON,
    code_version VARCHAR,
    source VARCHAR,
    configs JSON,
    metrics JSON,
    cases INTEGER,
    answerable INTEGER
);
CREATE TABLE IF NOT EXISTS eval_run_case (
    run_id VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    config VARCHAR NOT NULL,
    query VARCHAR,
    expected JSON,
    rank INTEGER,
    rr DOUBLE,
    top_entries JSON,
    filter VARCHAR,
    l0_domains JSON,
    layer VARCHAR,
    l1_status VARCHAR,
    fallback BOOLEAN,
    semantic_support BOOLEAN,
    support_score DOUBLE,
    miss JSON
);
ALTER TABLE eval_run_case ADD COLUMN IF NOT EXISTS miss JSON;
"""


def _clean(value: Any) -> Any:
    """NaN becomes None, so the JSON is valid and readers see 'does not apply'."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


class RunStore:
    """Saved runs in one DuckDB file. Holds no connection: each call opens the file for a moment."""

    def __init__(self, db_path: Path | str, *, lock_timeout_s: float = 30.0) -> None:
        self.db_path = Path(db_path)
        self.lock_timeout_s = lock_timeout_s

    def _with_connection(self, fn: Callable[[duckdb.DuckDBPyConnection], T], *, create: bool = True) -> T:
        """Open (read-write, like every other opener of the file in this process), ensure the tables (unless
        `create` is False: a read creates nothing), run `fn`, close; retry while another process holds the file."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        # within LOOKUP_DB_MEMORY_LIMIT / LOOKUP_DB_THREADS
        con = connect_retrying(self.db_path, db_budget(), timeout_s=self.lock_timeout_s, what="the run store")
        try:
            if create:
                con.execute(SCHEMA)
            return fn(con)
        except duckdb.Error as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc
        finally:
            con.close()

    # --- writing ----------------------------------------------------------------------------------------
    def save(self, report: EvalReport, eval_set: EvalSet, settings: Settings, *, source: str = "cli") -> RunSummary:
        """Store one eval run and its cases in one transaction. Returns what was saved (with its run_id)."""
        summary = RunSummary(
            run_id=new_run_id(),
            created_at=report.created_at,
            eval_set=eval_set.name,
            set_hash=set_hash(eval_set),
            set_path=eval_set.path,
            corpus=str(settings.corpus_dir),
            collection=settings.collection,
            settings=run_settings(report, settings),
            code_version=code_version(),
            source=source,
            configs=tuple(report.configs),
            metrics={row.pop("config"): _clean(row) for row in report.metrics_table()},
            cases=len(report.cases),
            answerable=sum(1 for c in report.cases if c.expected),
        )
        rows = [
            {
                "run_id": summary.run_id,
                "case_id": case.id,
                "config": config,
                "query": case.query,
                "expected": json.dumps(dict(case.expected), ensure_ascii=False),
                "rank": run.rank,
                "rr": run.rr,
                "top_entries": json.dumps(list(run.ranking), ensure_ascii=False),
                "filter": run.category,
                "l0_domains": json.dumps(list(case.l0_domains), ensure_ascii=False),
                "layer": run.layer,
                "l1_status": str(run.l1_status),
                "fallback": run.fallback,
                "semantic_support": run.semantic_support,
                "support_score": None if run.support_score is None else round(run.support_score, 5),
                "miss": None if run.miss is None else json.dumps(run.miss.to_dict(), ensure_ascii=False),
            }
            for case in report.cases
            for config, run in case.configs.items()
        ]
        frame = pd.DataFrame(rows).astype({"rank": "Int64", "support_score": "float64"})

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            con.execute("BEGIN TRANSACTION")
            try:
                values = {**summary.to_dict(), "configs": list(summary.configs)}
                for column in ("settings", "configs", "metrics"):
                    values[column] = json.dumps(values[column], default=str, ensure_ascii=False)
                con.execute(
                    f"INSERT INTO eval_run ({', '.join(_RUN_COLUMNS)}) VALUES ({', '.join('?' * len(_RUN_COLUMNS))})",
                    [values[c] for c in _RUN_COLUMNS],
                )
                con.register("incoming_cases", frame)
                con.execute("INSERT INTO eval_run_case BY NAME SELECT * FROM incoming_cases")
                con.unregister("incoming_cases")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

        self._with_connection(insert)
        return summary

    # --- reading ----------------------------------------------------------------------------------------
    def list_runs(self, eval_set: str | None = None) -> list[RunSummary]:
        """Saved runs, newest first; only those of one eval set when named."""
        where, params = ("WHERE eval_set = ?", [eval_set]) if eval_set else ("", [])
        sql = f"SELECT {_SELECT} FROM eval_run {where} ORDER BY created_at DESC, run_id DESC"
        rows = self._with_connection(lambda con: con.execute(sql, params).fetchall() if _has_runs(con) else [], create=False)
        return [_summary(row) for row in rows]

    def eval_sets(self) -> list[str]:
        """The names of the sets with saved runs. Like list_runs, creates no table in a file that has none."""
        sql = "SELECT DISTINCT eval_set FROM eval_run ORDER BY 1"
        rows = self._with_connection(lambda con: con.execute(sql).fetchall() if _has_runs(con) else [], create=False)
        return [r[0] for r in rows]

    def get(self, run_id: str) -> RunSummary:
        """One run; RunNotFound names the id when there is none."""
        sql = f"SELECT {_SELECT} FROM eval_run WHERE run_id = ?"
        rows = self._with_connection(lambda con: con.execute(sql, [run_id]).fetchall())
        if not rows:
            known = self._with_connection(lambda con: con.execute("SELECT count(*) FROM eval_run").fetchone())
            raise RunNotFound(run_id, int(known[0]) if known else 0, self.db_path)
        return _summary(rows[0])

    def cases(self, run_id: str, config: str | None = None) -> pd.DataFrame:
        """The per-case rows of one run (one configuration when named), JSON columns parsed."""
        where, params = "WHERE run_id = ?", [run_id]
        if config is not None:
            where, params = where + " AND config = ?", [run_id, config]
        frame = self._with_connection(
            lambda con: con.execute(f"SELECT * FROM eval_run_case {where} ORDER BY case_id, config", params).df()
        )
        for column in ("expected", "top_entries", "l0_domains", "miss"):
            frame[column] = frame[column].map(lambda v: json.loads(v) if isinstance(v, str) else v)
        frame["miss"] = frame["miss"].astype(object).where(frame["miss"].notna(), None)
        for column in ("filter", "layer", "l1_status"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
        return frame


_RUN_COLUMNS = tuple(f.name for f in dataclasses.fields(RunSummary))  # the eval_run columns, in order
# the time as microseconds since the epoch: a TIMESTAMPTZ fetched as a datetime needs pytz, which is not installed
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SELECT = ", ".join("epoch_us(created_at) AS created_at" if c == "created_at" else c for c in _RUN_COLUMNS)


def _has_runs(con: duckdb.DuckDBPyConnection) -> bool:
    found = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'eval_run'").fetchone()
    return bool(found and found[0])


def _summary(row: tuple) -> RunSummary:
    data = dict(zip(_RUN_COLUMNS, row, strict=True))
    created = data["created_at"]
    return RunSummary(
        run_id=data["run_id"],
        created_at=(_EPOCH + timedelta(microseconds=created)).isoformat() if isinstance(created, int) else str(created),
        eval_set=data["eval_set"],
        set_hash=data["set_hash"],
        set_path=data["set_path"],
        corpus=data["corpus"],
        collection=data["collection"],
        settings=json.loads(data["settings"] or "{}"),
        code_version=data["code_version"],
        source=data["source"],
        configs=tuple(json.loads(data["configs"] or "[]")),
        metrics=json.loads(data["metrics"] or "{}"),
        cases=int(data["cases"] or 0),
        answerable=int(data["answerable"] or 0),
    )
