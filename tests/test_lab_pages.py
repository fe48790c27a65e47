"""The lab in the app, with AppTest on the session's real Weaviate and a temporary DuckDB file (the setup of
test_app_pages): judging a Lookup result and a selected Invocations call into eval sets that Evaluate then
lists and runs, and replaying recorded calls from the Invocations page."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from app_support import judging as judging_ui
from retrieval import catalog
from retrieval.config import REPO_ROOT
from retrieval.eval_sets import load_eval_set
from retrieval.hints import L0Index
from retrieval.invocations import InvocationStore
from retrieval.lab import judgments
from retrieval.lookup import LookupServices, lookup_knowledge

from . import test_app_pages as pages
from .test_app_pages import PAGES, assert_clean, metrics, open_app, texts

# The AppTest setup of test_app_pages: its fixtures, found by pytest under these names in this module.
app_env = pages.app_env
fresh_caches = pages.fresh_caches
navigation_like_a_running_server = pages.navigation_like_a_running_server
served_on = pages.served_on

ALERTS = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"


@pytest.fixture
def eval_dir(monkeypatch, tmp_path):
    """The app's eval_sets/ is a temporary folder (with a copy of the sample alerts set), so that judging never
    writes into the repository and the set pickers list what the test wrote."""
    repo = tmp_path / "repo"
    (repo / "eval_sets").mkdir(parents=True)
    shutil.copyfile(ALERTS, repo / "eval_sets" / ALERTS.name)
    monkeypatch.setitem(catalog.eval_set_files.__kwdefaults__, "repo_root", repo)
    monkeypatch.setitem(catalog.eval_set_files.__kwdefaults__, "shared_dir", tmp_path / "no-shared")
    monkeypatch.setattr(judgments, "DEFAULT_DIR", repo / "eval_sets")
    return repo / "eval_sets"


def successes(at) -> list[str]:
    return [s.replace("**", "") for s in texts(at.success)]


def test_judging_a_lookup_appends_creates_and_the_set_runs_in_evaluate(app_env, eval_dir):
    alerts = eval_dir / ALERTS.name
    before = alerts.read_bytes()
    at = open_app(q="Pod keeps restarting")
    assert at.selectbox(key="judge_lookup_set").value == f"eval_sets/{ALERTS.name}"  # the set that fits is preselected
    assert at.button(key="judge_lookup_add").disabled  # nothing judged yet
    at.multiselect(key="judge_lookup_relevant").select("kubernetes/PodCrashLoopBackOff").run()
    at.button(key="judge_lookup_add").click().run()
    assert_clean(at)
    assert any("case PodKeepsRestarting" in s and "49 cases now" in s for s in successes(at)), successes(at)
    after = alerts.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 4  # the case added at the end
    case = load_eval_set(alerts).cases[-1]
    assert (case.query, case.expected, case.domain) == (
        "Pod keeps restarting",
        {"kubernetes/PodCrashLoopBackOff": 1},
        "kubernetes",
    )

    # a taken id: refused, naming the field; the file as it was
    at.text_input(key="judge_lookup_case_id").input("PodKeepsRestarting").run()
    at.button(key="judge_lookup_add").click().run()
    assert any("field 'id'" in e for e in texts(at.error))
    assert alerts.read_bytes() == after

    # a new set, then an unanswerable case added to it from the known sets
    at.text_input(key="judge_lookup_case_id").input("").run()
    at.radio(key="judge_lookup_where").set_value(judging_ui.NEW).run()
    at.text_input(key="judge_lookup_new_name").input("judged-pods").run()
    at.button(key="judge_lookup_add").click().run()
    assert any("Created" in s and "judged-pods.yaml" in s for s in successes(at)), successes(at)
    at.radio(key="judge_lookup_where").set_value(judging_ui.KNOWN).run()
    at.selectbox(key="judge_lookup_set").select("eval_sets/judged-pods.yaml").run()
    at.checkbox(key="judge_lookup_none").check().run()
    at.button(key="judge_lookup_add").click().run()
    judged = load_eval_set(eval_dir / "judged-pods.yaml")
    assert [(c.id, c.expected) for c in judged.cases] == [
        ("PodKeepsRestarting", {"kubernetes/PodCrashLoopBackOff": 1}),
        ("PodKeepsRestarting-2", {}),
    ]
    # judging records nothing. The app's store keeps the rows it records in its spool for up to a second;
    # the Invocations page reads through that store, which moves them into DuckDB first.
    at.switch_page(PAGES["Invocations"]).run()
    assert InvocationStore(app_env / "invocations.duckdb").count() == 0

    at.switch_page(PAGES["Evaluate"]).run()
    assert "eval_sets/judged-pods.yaml" in at.selectbox(key="es").options
    at.selectbox(key="es").select("eval_sets/judged-pods.yaml").run()
    at.multiselect(key="eval_configs-True").set_value(["l0_only", "lookup"]).run()
    at.button(key="run_eval").click().run()
    assert_clean(at)
    assert any("judged-pods" in t for t in texts(at.markdown) + texts(at.caption) + texts(at.success) + texts(at.info))


def test_judging_a_selected_invocations_call(app_env, eval_dir, sample_corpus, sample_store, embedder, base_settings):
    recorder = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
    recorded = lookup_knowledge("Disk full on the Postgres primary", services, base_settings.with_(collection="TestSample"))
    recorder.close()
    at = open_app("Invocations")
    at.session_state["inv_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert any(recorded.invocation_id in t for t in texts(at.markdown))  # the call is shown
    at.multiselect(key="judge_call_relevant").select("databases/PostgresDiskFull").run()
    at.button(key="judge_call_add").click().run()
    assert_clean(at)
    case = load_eval_set(eval_dir / ALERTS.name).cases[-1]
    assert (case.query, case.expected, case.domain) == (
        "Disk full on the Postgres primary",
        {"databases/PostgresDiskFull": 1},
        "databases",
    )
    assert f"from invocation {recorded.invocation_id}" in (eval_dir / ALERTS.name).read_text()


def test_read_only_offers_no_judging(app_env, eval_dir, monkeypatch):
    monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
    at = open_app(q="Vault is sealed")
    assert any("Judging is off" in t for t in texts(at.caption))
    assert "judge_lookup_add" not in {b.key for b in at.button}


def test_replay_on_invocations_counts_outcomes_and_records_only_when_asked(
    app_env, sample_corpus, sample_store, embedder, base_settings
):
    store = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, store)
    settings = base_settings.with_(collection="TestSample", session_tag="seed")
    for query in ("PostgreSQL replication lag on the standby", "zebra quantum marmalade", "Pod keeps restarting"):
        lookup_knowledge(query, services, settings)
    store.close()

    at = open_app("Invocations", l1="false")  # the changed setting: L1 off in the sidebar
    at.button(key="replay_run").click().run()
    assert_clean(at)
    m = metrics(at)
    assert int(m["Now empty"]) == 1 and int(m["Unchanged"]) >= 1
    assert int(m["Changed"]) + int(m["Unchanged"]) + int(m["Now empty"]) == 3 and m["Failed"] == "0"
    table = next(d.value for d in at.dataframe if "top after" in d.value.columns)
    row = table.set_index("query").loc["zebra quantum marmalade"]
    assert row["outcome"] == "now empty" and pd.isna(row["top after"]) and row["top before"]
    assert any("nothing recorded" in t for t in texts(at.caption))
    assert InvocationStore(app_env / "invocations.duckdb").count() == 3

    at.checkbox(key="replay_record").check().run()
    at.text_input(key="replay_tag").input("replay-app").run()
    at.button(key="replay_run").click().run()
    assert_clean(at)
    assert any("recorded with session tag replay\\-app" in c.value for c in at.caption)
    assert InvocationStore(app_env / "invocations.duckdb").count("replay-app") == 3
