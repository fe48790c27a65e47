"""Saved eval runs: real eval runs of the sample set on the real Weaviate, saved in a real DuckDB file."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from retrieval.cli.runs import runs_table
from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.errors import LookupLabError, RunNotFound
from retrieval.evals.coverage import COVERAGE_KEY
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.lab.run_provenance import code_version, set_hash, settings_dict
from retrieval.lab.run_summary import HISTORY_METRICS, NO_MODEL, history_rows
from retrieval.lab.runs import RunStore

from ..helpers.lab import forget_model

SAMPLE_EVAL = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"


@pytest.fixture(scope="module")
def sample_run(sample_corpus, sample_store, embedder, base_settings):
    """One real eval of the sample set (two configurations), not recorded."""
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)
    eval_set = load_eval_set(SAMPLE_EVAL, known_ids=[e.entry_id for e in sample_corpus.entries])
    settings = base_settings.with_(collection="TestSample", weaviate_api_key="not-to-be-saved")
    report = run_eval(eval_set, services, settings, configs=["l1_unfiltered", "lookup"])
    return eval_set, report, settings


def test_a_saved_run_reads_back_with_its_cases(sample_run, tmp_path):
    eval_set, report, settings = sample_run
    store = RunStore(tmp_path / "inv.duckdb")
    saved = store.save(report, eval_set, settings, source="test")
    got = store.get(saved.run_id)
    assert got == saved
    assert (got.eval_set, got.cases, got.answerable) == ("sample-ops-alerts", 48, 48)
    assert got.configs == ("l1_unfiltered", "lookup")
    assert got.collection == "TestSample" and got.corpus == str(settings.corpus_dir)
    assert got.metrics["lookup"]["mrr@10"] == pytest.approx(report.metrics["lookup"]["mrr@10"])
    assert got.metrics["lookup"]["correct_supported_rate"] == report.routing["lookup"]["correct_supported_rate"]
    assert got.settings["vector_weight"] == settings.vector_weight and got.settings["search_mode"] == settings.search_mode
    assert "weaviate_api_key" not in got.settings and "not-to-be-saved" not in json.dumps(got.to_dict())
    assert got.code_version and got.code_version == code_version()
    assert got.set_hash == set_hash(eval_set)

    cases = store.cases(saved.run_id)
    assert len(cases) == 48 * 2
    lookup = cases[cases["config"] == "lookup"].set_index("case_id")
    by_id = {c["id"]: c for c in report.to_dict()["cases"]}
    for case_id, row in lookup.iterrows():
        want = by_id[case_id]["configs"]["lookup"]
        assert row["top_entries"] == want["ranking"]
        assert (None if pd.isna(row["rank"]) else int(row["rank"])) == want["rank"]
        assert row["rr"] == pytest.approx(want["rr"])
        assert row["filter"] == want["category"] and bool(row["semantic_support"]) == want["semantic_support"]
        assert row["expected"] == by_id[case_id]["expected"]
        assert row["l0_domains"] == by_id[case_id]["routing"]["l0_domains"]
    # the mean of the stored reciprocal ranks is the run's mrr@10 (every answer ranked within 10 here or missing)
    assert lookup["rr"].mean() == pytest.approx(report.metrics["lookup"]["mrr@10"], abs=1e-9)


def test_list_filters_by_set_newest_first_and_survives_a_reopen(sample_run, tmp_path):
    eval_set, report, settings = sample_run
    db = tmp_path / "inv.duckdb"
    first = RunStore(db).save(report, eval_set, settings)
    other = load_eval_set(SAMPLE_EVAL)
    renamed = type(other)(
        "other-set", other.description, other.path, other.corpus_dir, other.cases[:3]
    )  # same cases, another name and content
    # a run made a second later (the same report twice would tie on time, and the order would be the ids')
    later = (datetime.fromisoformat(report.created_at) + timedelta(seconds=1)).isoformat()
    second = RunStore(db).save(replace(report, created_at=later), renamed, settings)
    again = RunStore(db)
    assert [r.run_id for r in again.list_runs()] == [second.run_id, first.run_id]
    assert [r.run_id for r in again.list_runs("sample-ops-alerts")] == [first.run_id]
    assert again.list_runs("no-such-set") == []
    assert again.eval_sets() == ["other-set", "sample-ops-alerts"]
    assert set_hash(renamed) != set_hash(eval_set)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM eval_run_case").fetchone() == (2 * 96,)


def test_an_unknown_run_id_is_named(tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    with pytest.raises(RunNotFound, match="'nope-123'") as err:
        store.get("nope-123")
    assert isinstance(err.value, LookupLabError) and "0 runs saved" in str(err.value)


def test_saving_waits_for_another_process_holding_the_file(sample_run, tmp_path):
    """The file held read-write by another process: save retries on the lock until it is free, or fails naming the file."""
    import subprocess
    import sys

    eval_set, report, settings = sample_run
    db = tmp_path / "inv.duckdb"
    RunStore(db).list_runs()  # create the tables
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LookupLabError, match=str(db.name)):
            RunStore(db, lock_timeout_s=0.3).save(report, eval_set, settings)
    finally:
        holder.communicate("", timeout=60)
    saved = RunStore(db).save(report, eval_set, settings)
    assert [r.run_id for r in RunStore(db).list_runs()] == [saved.run_id]


def test_settings_dict_is_json_ready(base_settings):
    data = settings_dict(base_settings)
    json.dumps(data)
    assert data["corpus_dir"] == str(base_settings.corpus_dir) and isinstance(Path(data["data_dir"]), Path)


def test_the_model_is_saved_and_a_run_saved_before_it_shows_a_dash(sample_run, tmp_path):
    eval_set, report, settings = sample_run
    db = tmp_path / "inv.duckdb"
    store = RunStore(db)
    saved = store.save(report, eval_set, settings)
    assert report.settings["embedding_model"] == settings.embedding_model == "bge-small-en-v1.5"
    got = store.get(saved.run_id)
    assert got.settings["embedding_model"] == got.embedding_model == got.to_dict()["embedding_model"] == "bge-small-en-v1.5"
    # the report says which model embedded: that is the one saved
    e5 = store.save(replace(report, settings={**report.settings, "embedding_model": "e5-small-v2"}), eval_set, settings)
    assert store.get(e5.run_id).embedding_model == "e5-small-v2"

    old = store.save(report, eval_set, settings)
    forget_model(db, old.run_id)
    before = store.get(old.run_id)
    assert before.embedding_model is None and before.to_dict()["embedding_model"] is None
    rows = {r["run_id"]: r for r in history_rows([before, got])}
    assert rows[old.run_id]["embedding_model"] == NO_MODEL == "–"
    assert rows[saved.run_id]["embedding_model"] == "bge-small-en-v1.5"
    columns = list(rows[saved.run_id])
    assert columns[:4] == ["run_id", "time", "set", "mrr@10"]  # what a run scored first
    assert columns[3 + len(HISTORY_METRICS)] == "embedding_model"  # after the metrics, first of the settings
    lines = runs_table([before, got]).splitlines()
    assert "settings" in lines[0]
    assert lines[1].startswith(old.run_id) and "embedding_model=– search_mode=fusion" in lines[1]
    assert lines[2].startswith(saved.run_id) and "embedding_model=bge-small-en-v1.5 search_mode=fusion" in lines[2]


def test_a_run_saves_the_top_k_it_ranked_with(sample_run, tmp_path):
    """The app's top_k is 5; an eval ranks 10 deep: the saved settings say 10, as the run's JSON and report do."""
    eval_set, report, settings = sample_run
    assert settings.top_k == 5 and report.settings["top_k"] == 10
    saved = RunStore(tmp_path / "inv.duckdb").save(report, eval_set, settings, source="test")
    assert saved.settings["top_k"] == report.settings["top_k"] == 10


def test_reading_runs_creates_no_table(tmp_path):
    """A read-only app lists runs: an invocation database without runs gets no eval_run table from it."""
    path = tmp_path / "inv.duckdb"
    duckdb.connect(str(path)).close()
    store = RunStore(path)
    assert store.list_runs() == [] and store.eval_sets() == []
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM information_schema.tables").fetchone() == (0,)
    finally:
        con.close()


def test_judgment_coverage_is_saved_and_a_run_saved_before_it_reads_as_unknown(sample_run, tmp_path):
    eval_set, report, settings = sample_run
    db = tmp_path / "inv.duckdb"
    store = RunStore(db)
    saved = store.save(report, eval_set, settings)
    got = store.get(saved.run_id)
    measured = report.coverage["configs"]["lookup"]["share"]
    assert measured is not None and got.judged_share("lookup") == measured
    assert got.judged_share("l1_unfiltered") == report.coverage["configs"]["l1_unfiltered"]["share"]
    old = store.save(report, eval_set, settings)
    with duckdb.connect(str(db)) as con:  # as a run saved before coverage was measured: no judged@10 in its metrics
        (stored,) = con.execute("SELECT metrics FROM eval_run WHERE run_id = ?", [old.run_id]).fetchone()
        metrics = {c: {k: v for k, v in m.items() if k != COVERAGE_KEY} for c, m in json.loads(stored).items()}
        con.execute("UPDATE eval_run SET metrics = ? WHERE run_id = ?", [json.dumps(metrics), old.run_id])
    before = store.get(old.run_id)
    assert before.judged_share() is None and before.metrics["lookup"]["mrr@10"] == got.metrics["lookup"]["mrr@10"]
    rows = {r["run_id"]: r for r in history_rows(store.list_runs())}
    assert rows[old.run_id][COVERAGE_KEY] is None and rows[saved.run_id][COVERAGE_KEY] == measured
