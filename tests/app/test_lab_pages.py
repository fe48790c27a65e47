"""The lab in the app, with AppTest on the session's real Weaviate and a temporary DuckDB file (the setup of
tests/app/conftest.py): judging a Lookup result and a selected Invocations call into eval sets that Evaluate then
lists and runs, and replaying recorded calls from the Invocations page."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from app_support import judging as judging_ui
from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.evals import catalog
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore

from ..helpers.app import PAGES, assert_clean, metrics, open_app, texts

ALERTS = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"


@pytest.fixture
def eval_dir(monkeypatch, tmp_path):
    """The app's eval_sets/ is a temporary folder (with a copy of the sample alerts set), so that the set pickers
    list what the test wrote; judged sets go to the judgments folder beside the invocation database."""
    repo = tmp_path / "repo"
    (repo / "eval_sets").mkdir(parents=True)
    shutil.copyfile(ALERTS, repo / "eval_sets" / ALERTS.name)
    monkeypatch.setitem(catalog.eval_set_files.__kwdefaults__, "repo_root", repo)
    monkeypatch.setitem(catalog.eval_set_files.__kwdefaults__, "shared_dir", tmp_path / "no-shared")
    return repo / "eval_sets"


def successes(at) -> list[str]:
    return [s.replace("**", "") for s in texts(at.success)]


def test_judging_goes_to_the_judgments_folder_once_and_the_set_runs_in_evaluate(app_env, eval_dir):
    alerts = eval_dir / ALERTS.name
    before = alerts.read_bytes()
    judged = app_env / "judged-eval-sets" / "judged-sample_corpus.yaml"  # beside invocations.duckdb
    at = open_app(q="Pod keeps restarting")
    # no judged set yet: a new one in the judgments folder, its full path shown before anything is written
    assert at.radio(key="judge_lookup_where").value == judging_ui.NEW
    assert at.text_input(key="judge_lookup_new_name").value == "judged-sample_corpus"
    assert any(f"Creates {judged.resolve()}" in t.replace("**", "") for t in texts(at.caption)), texts(at.caption)
    assert at.button(key="judge_lookup_add").disabled  # nothing judged yet
    at.multiselect(key="judge_lookup_relevant").select("kubernetes/PodCrashLoopBackOff").run()
    assert any("The case gets domain: kubernetes" in t.replace("**", "") for t in texts(at.caption))
    at.button(key="judge_lookup_add").click().run()
    assert_clean(at)
    assert any("Created" in s and "case PodKeepsRestarting" in s for s in successes(at)), successes(at)
    assert alerts.read_bytes() == before  # the repository's set is untouched
    case = load_eval_set(judged).cases[-1]
    assert (case.query, case.expected, case.domain) == (
        "Pod keeps restarting",
        {"kubernetes/PodCrashLoopBackOff": 1},
        "kubernetes",
    )

    # the judged set is preselected from now on; the same judgment again is refused, the file as it was
    at = open_app(q="Pod keeps restarting")
    assert at.radio(key="judge_lookup_where").value == judging_ui.KNOWN
    assert at.selectbox(key="judge_lookup_set").value == "judged/judged-sample_corpus.yaml"
    assert any(f"Appends to {judged.resolve()}" in t.replace("**", "") for t in texts(at.caption))
    written = judged.read_bytes()
    at.multiselect(key="judge_lookup_relevant").select("kubernetes/PodCrashLoopBackOff").run()
    at.button(key="judge_lookup_add").click().run()
    assert any("already holds this judgment" in e for e in texts(at.error)), texts(at.error)
    assert judged.read_bytes() == written

    # an unanswerable judgment of the same query is another case
    at.multiselect(key="judge_lookup_relevant").set_value([]).run()
    at.checkbox(key="judge_lookup_none").check().run()
    assert any("The case gets domain: kubernetes" in t.replace("**", "") for t in texts(at.caption))  # routed there
    at.button(key="judge_lookup_add").click().run()
    assert [(c.id, c.expected, c.domain) for c in load_eval_set(judged).cases] == [
        ("PodKeepsRestarting", {"kubernetes/PodCrashLoopBackOff": 1}, "kubernetes"),
        ("PodKeepsRestarting-2", {}, "kubernetes"),
    ]
    # judging records nothing. The app's store keeps the rows it records in its spool for up to a second;
    # the Invocations page reads through that store, which moves them into DuckDB first.
    at.switch_page(PAGES["Invocations"]).run()
    assert InvocationStore(app_env / "invocations.duckdb").count() == 0

    at.switch_page(PAGES["Evaluate"]).run()
    assert at.selectbox(key="es").value == f"eval_sets/{ALERTS.name}"  # judged sets are listed, never preselected
    at.selectbox(key="es").select("judged/judged-sample_corpus.yaml").run()
    at.multiselect(key="eval_configs-True").set_value(["l0_only"]).run()  # beside lookup, which always runs
    at.button(key="run_eval").click().run()
    assert_clean(at)
    assert any("judged-sample_corpus" in t for t in texts(at.markdown) + texts(at.caption) + texts(at.success) + texts(at.info))


def test_judging_offers_only_the_sets_that_fit_the_corpus(app_env, eval_dir):
    """The runbooks unanswerable set expects no entry (it would fit any corpus by its ids) but names another corpus."""
    runbooks_set = eval_dir / "runbooks-unanswerable.yaml"
    runbooks_set.write_text(
        "name: runbooks-unanswerable\ncorpus: ../../runbooks\ncases:\n  - id: A\n    query: Kafka lag\n    expected: []\n"
    )
    at = open_app(q="Pod keeps restarting")
    at.radio(key="judge_lookup_where").set_value(judging_ui.KNOWN).run()
    assert at.selectbox(key="judge_lookup_set").options == [f"eval_sets/{ALERTS.name} (48 cases)"]


def test_judging_a_selected_invocations_call(app_env, eval_dir, sample_corpus, sample_store, embedder, base_settings):
    recorder = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
    recorded = lookup_knowledge(
        "Disk full on the Postgres primary", services, base_settings.with_(collection="TestSample").options()
    )
    recorder.close()
    at = open_app("Invocations")
    at.session_state["inv_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert any(recorded.invocation_id in t for t in texts(at.markdown))  # the call is shown
    at.multiselect(key="judge_call_relevant").select("databases/PostgresDiskFull").run()
    at.button(key="judge_call_add").click().run()
    assert_clean(at)
    judged = app_env / "judged-eval-sets" / "judged-sample_corpus.yaml"  # the default: a new set in the judgments folder
    case = load_eval_set(judged).cases[-1]
    assert (case.query, case.expected, case.domain) == (
        "Disk full on the Postgres primary",
        {"databases/PostgresDiskFull": 1},
        "databases",
    )
    assert f"from invocation {recorded.invocation_id}" in judged.read_text()
    # the shown results left unmarked are judged not relevant, and the case names the call it was judged from
    shown = [r.entry_id for r in recorded.results]
    assert "databases/PostgresDiskFull" in shown and len(shown) > 1
    assert case.not_relevant == tuple(e for e in shown if e != "databases/PostgresDiskFull")
    assert case.invocation == recorded.invocation_id


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
        lookup_knowledge(query, services, settings.options())
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
