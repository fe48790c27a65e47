"""The app as its users found it, with AppTest on the session's real Weaviate and a temporary DuckDB
file (the setup of tests/app/conftest.py): queries over the length limit, read-only Evaluate and Replay, the
preselected eval set, run details that agree."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import pandas as pd

from retrieval.core.lookup import MAX_QUERY_CHARS
from retrieval.records.invocations import InvocationStore

from ..helpers.app import PAGES, assert_clean, html_bodies, open_app, plotly_specs, results_table, texts
from ..helpers.db_rows import table_rows

LONG = ("Disk full on the Postgres primary, and then " * 120).strip()  # 5,000+ characters
UNANSWERABLE = "eval_sets/sample-ops-unanswerable.yaml"


def recorded_inputs(db) -> list[str]:
    return list(InvocationStore(db).query("SELECT input FROM tool_invocation ORDER BY created_at")["input"])


# --- text over the limit -----------------------------------------------------------------------------------
def test_a_long_query_from_the_url_is_shown_whole_refused_and_never_recorded(app_env):
    assert len(LONG) > 5000
    at = open_app(q=LONG)
    assert at.text_input(key="q").value == LONG  # not cut silently
    assert any(f"{len(LONG):,} characters long" in w and "nothing was searched or recorded" in w for w in texts(at.warning))
    assert not [s for s in at.subheader if s.value == "Results"]  # no lookup ran
    at.switch_page(PAGES["Invocations"]).run()
    assert InvocationStore(app_env / "invocations.duckdb").count() == 0


def test_searching_the_first_characters_shows_and_records_exactly_what_is_searched(app_env):
    at = open_app(q=LONG)
    at.button(key="lookup_cut").click().run()
    assert_clean(at)
    shown = at.text_input(key="q").value
    assert shown == LONG[:MAX_QUERY_CHARS]
    assert at.query_params["q"] == [shown] or at.query_params["q"] == shown  # the URL carries what is searched
    assert [s for s in at.subheader if s.value == "Results"]
    at.switch_page(PAGES["Invocations"]).run()
    assert recorded_inputs(app_env / "invocations.duckdb") == [shown]


def test_a_long_typed_query_is_refused_with_the_offer(app_env):
    at = open_app()
    at.text_input(key="q").input("x" * (MAX_QUERY_CHARS + 1)).run()
    assert any("2,001 characters long" in w for w in texts(at.warning))
    assert at.button(key="lookup_cut").label == f"Search the first {MAX_QUERY_CHARS:,} characters"
    at.switch_page(PAGES["Invocations"]).run()
    assert InvocationStore(app_env / "invocations.duckdb").count() == 0


# --- read-only Evaluate and Replay -------------------------------------------------------------------------
def test_read_only_evaluate_neither_records_nor_saves(app_env, monkeypatch):
    monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
    at = open_app("Evaluate", es=UNANSWERABLE)
    assert any("neither saved on the Runs page nor recorded" in i for i in texts(at.info))
    record = next(c for c in at.checkbox if c.label.startswith("Record the lookups"))
    assert record.disabled and record.value is False
    at.multiselect(key="eval_configs-True").set_value(["l0_only"]).run()  # beside lookup, which always runs
    at.button(key="run_eval").click().run()
    assert_clean(at)
    assert not [c for c in texts(at.caption) if "Saved as run" in c]
    at.switch_page(PAGES["Invocations"]).run()  # moves what the app spooled into DuckDB
    rows = table_rows(app_env / "invocations.duckdb")
    assert {t: n for t, n in rows.items() if n} == {}, rows


# --- the preselected eval set -------------------------------------------------------------------------------
def test_the_largest_fitting_set_is_preselected_and_the_last_choice_is_kept(app_env):
    at = open_app("Evaluate")
    assert at.selectbox(key="es").value == "eval_sets/sample-ops-alerts.yaml"  # 48 cases with answers
    at.selectbox(key="es").select(UNANSWERABLE).run()
    at.switch_page(PAGES["Filter comparison"]).run()
    assert at.selectbox(key="eval").value == UNANSWERABLE  # the user's choice, on another page
    at.switch_page(PAGES["Evaluate"]).run()
    assert at.selectbox(key="es").value == UNANSWERABLE


# --- run details that agree --------------------------------------------------------------------------------
def test_an_unanswerable_only_run_draws_no_empty_chart_and_shows_no_none(app_env):
    at = open_app("Evaluate", es=UNANSWERABLE)
    at.multiselect(key="eval_configs-True").set_value(["l0_only"]).run()  # beside lookup, which always runs
    at.button(key="run_eval").click().run()
    assert_clean(at)
    titles = [str(spec.get("layout", {}).get("title", {}).get("text", "")) for spec in plotly_specs(at)]
    assert "Metrics per configuration" not in titles
    assert any("no answerable case" in c for c in texts(at.caption))
    latency = next(d.value for d in at.dataframe if any(str(c).endswith("_p50") for c in d.value.columns))
    values = latency.to_numpy().ravel()
    assert all(isinstance(v, str) and (v == "–" or float(v) >= 0) for v in values), values  # the grid draws NaN as "None"
    assert "–" in values  # l0_only has no L1 stages


# --- a result's full entry ------------------------------------------------------------------------------------
def test_a_result_opens_its_entry_on_the_corpus_page_with_the_entry_in_the_url(app_env):
    at = open_app(q="PostgreSQL replication lag on the standby")
    links = [p.proto for p in at.get("page_link") if "corpus" in p.proto.page]
    assert links, [p.proto.page for p in at.get("page_link")]
    first = dict(parse_qsl(links[0].query_string))
    assert first["entry"] == "databases/PostgresReplicationLag" and links[0].label.startswith("#1 databases")
    corpus = open_app("Corpus", entry=first["entry"])
    assert corpus.selectbox(key="entry").value == "databases/PostgresReplicationLag"
    assert any("Text of databases/PostgresReplicationLag" in e.label for e in corpus.expander)


# --- layout ---------------------------------------------------------------------------------------------------
def test_long_keyword_labels_are_shortened_in_their_middle_and_whole_in_the_hover():
    from app_support.charts import LABEL_CHARS, short_label, top_counts

    long = "PrometheusRemoteWriteDesiredShards"
    assert short_label(long).startswith("Prometheus") and short_label(long).endswith("DesiredShards")
    assert len(short_label(long)) == LABEL_CHARS and short_label("etcd") == "etcd"
    frame = pd.DataFrame({"keyword": [long, long + "Total", "etcd"], "calls": [5, 3, 1], "field": ["title"] * 3})
    fig = top_counts(frame, "keyword", "Top L0 keywords", color="field")
    shown = list(fig.data[0].y)
    assert all(len(y.strip()) <= LABEL_CHARS for y in shown) and len(set(shown)) == 3
    assert set(fig.data[0].hovertext) == {long, long + "Total", "etcd"}
    assert fig.layout.yaxis.automargin is True


def test_the_lookup_page_lays_out_keywords_full_width_and_why_here_under_the_results(app_env):
    at = open_app(q="PostgreSQL replication lag on the standby")
    assert "why here" not in results_table(at).columns
    assert any(t.startswith("**Why here**") and "**#1** databases/PostgresReplicationLag: " in t for t in texts(at.markdown))
    assert all('style="overflow-wrap: anywhere;"' in b for b in html_bodies(at) if b.startswith("<div"))


def test_the_largest_fitting_repository_or_shared_set_is_preferred_and_judged_sets_never(tmp_path):
    from retrieval.evals.catalog import EvalSetFile, preferred_eval_set

    corpus = tmp_path / "corpus"
    corpus.mkdir()

    def eval_set(name: str, cases: int, answerable: bool = True) -> Path:
        lines = [f"name: {name}", "corpus: ../corpus", "cases:"]
        for i in range(cases):
            lines += [f"  - id: C{i}", f"    query: question {i}", f"    expected: [{'a/B' if answerable else ''}]"]
        path = tmp_path / "sets" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    files = [
        EvalSetFile("eval_sets/a-small.yaml", eval_set("a-small", 2)),
        EvalSetFile("eval_sets/b-unanswerable.yaml", eval_set("b-unanswerable", 50, answerable=False)),
        EvalSetFile("judged/big-judged.yaml", eval_set("big-judged", 80)),
        EvalSetFile("shared/eval_sets/c-large.yaml", eval_set("c-large", 30)),
    ]
    assert preferred_eval_set(files, corpus) == 3  # the largest with answers, not the first, not the judged one
