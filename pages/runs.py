"""Runs: the saved eval runs (retrieval.lab.runs): history, a metric trend for one set, two runs compared
(retrieval.lab.compare) with a per-case table whose rows open the case in Lookup."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_support import causes_view, charts, render, resources, urls
from app_support.render import md
from retrieval.errors import LookupLabError
from retrieval.evals.evaluation import CONFIGS, METRICS
from retrieval.evals.settings_strip import value_text
from retrieval.lab.compare import NOT_FOUND, RunComparison, compare_runs, default_pair, rank_text
from retrieval.lab.runs import HISTORY_METRICS, NO_MODEL, RunStore, RunSummary, history_rows, shared_settings

# this page's widget keys (bound to the URL: /runs?runs_set=...&run_a=...&run_b=... reopens a comparison)
SET_KEY, CONFIG_KEY, A_KEY, B_KEY, METRIC_KEY, CASES_KEY = (
    "runs_set",
    "runs_config",
    "run_a",
    "run_b",
    "runs_metric",
    "runs_cases",
)
ALL_SETS = "All eval sets"
TREND_METRICS = ("mrr@10", "hit@1", "recall@5")


def pick_runs(store: RunStore, sets: list[str]) -> tuple[str, list[RunSummary], str]:
    """The eval set and configuration boxes: (set or ALL_SETS, its runs newest first, configuration)."""
    every_run = store.list_runs()
    # the two latest runs of one set that both ran lookup: a comparison across sets, or of a run without it, fails
    pair = default_pair(every_run, "lookup") or default_pair(every_run)
    default_set = next(r.eval_set for r in every_run if r.run_id == pair[1]) if pair else None
    c1, c2 = st.columns(2)
    options = [ALL_SETS, *sets]
    picked = c1.selectbox(
        "Eval set", options, index=options.index(default_set) if default_set else 0, key=SET_KEY, bind="query-params"
    )
    runs = every_run if picked == ALL_SETS else [r for r in every_run if r.eval_set == picked]
    configs = [c for c in CONFIGS if any(c in r.configs for r in runs)]
    config = c2.selectbox(
        "Configuration", configs, index=configs.index("lookup") if "lookup" in configs else 0, key=CONFIG_KEY, bind="query-params"
    )
    return picked, runs, config


def history_section(picked: str, runs: list[RunSummary], config: str) -> None:
    """The runs' metrics as a table, and one set's trend."""
    st.subheader(f"History ({len(runs)} runs)")
    shared = shared_settings(rows := history_rows(runs, config))
    history = pd.DataFrame(rows)
    st.dataframe(
        history.drop(columns=list(shared)),
        hide_index=True,
        column_config={
            "time": st.column_config.DatetimeColumn("time (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            **{m: st.column_config.NumberColumn(m, format="%.3f") for m in HISTORY_METRICS},
        },
    )
    if shared:
        shown = " · ".join(f"`{k}={value_text(v).replace('`', '')}`" for k, v in shared.items())  # code: no escapes
        st.caption(f"Same in every run: {shown}")
    if picked == ALL_SETS:
        st.caption("Pick one eval set to see its metric trend.")
    else:
        st.plotly_chart(charts.metric_trend(history, TREND_METRICS, f"{picked}: {config} over time"), width="stretch")


def pick_pair(runs: list[RunSummary], config: str) -> tuple[RunSummary, RunSummary, str] | None:
    """Runs A and B (at first the newest pair that ran `config`) with their settings strips, and the metric cases
    move on; None when A is B."""
    by_id = {r.run_id: r for r in runs}
    ids = list(by_id)  # newest first
    a_default, b_default = default_pair(runs, config) or default_pair(runs) or (ids[1], ids[0])
    a_col, b_col, m_col = st.columns([2, 2, 1])
    run_a = a_col.selectbox("Run A (before)", ids, index=ids.index(a_default), key=A_KEY, bind="query-params")
    run_b = b_col.selectbox("Run B (after)", ids, index=ids.index(b_default), key=B_KEY, bind="query-params")
    metric = m_col.selectbox("Cases moved on", list(METRICS), index=list(METRICS).index("mrr@10"), key=METRIC_KEY)
    for name, column, run in (("A", a_col, by_id[run_a]), ("B", b_col, by_id[run_b])):
        with column:  # the ids alone in the boxes (they are what the URL carries); the settings strip under each
            strip_settings = {**run.settings, "embedding_model": run.embedding_model or NO_MODEL}
            render.settings_strip(strip_settings, label=f"{name}: {run.eval_set}", key=f"runs_{name.lower()}_settings")
    if run_a == run_b:
        st.warning(f"A and B are the same run ({md(run_a)}): pick two different runs to compare.", icon=":material/warning:")
        return None
    if by_id[run_a].eval_set != by_id[run_b].eval_set:
        st.caption(
            f"A ran **{md(by_id[run_a].eval_set)}** and B **{md(by_id[run_b].eval_set)}**: only the cases both sets share "
            "are compared."
        )
    return by_id[run_a], by_id[run_b], metric


def compare_section(store: RunStore, runs: list[RunSummary], config: str) -> None:
    """Two runs compared: settings changed, the verdict, the metric deltas, and the cases that moved."""
    st.subheader("Compare two runs")
    if len(runs) < 2:
        st.info("Two saved runs are needed: run the set again with other settings.", icon=":material/info:")
        return
    pair = pick_pair(runs, config)
    if pair is None:
        return
    run_a, run_b, metric = pair
    try:
        cmp = compare_runs(store, run_a.run_id, run_b.run_id, config=config, metric=metric)
    except LookupLabError as exc:
        render.error("These runs cannot be compared", exc, "Pick another configuration, or two runs that both ran it.")
        return
    for warning in cmp.warnings:
        st.warning(md(warning), icon=":material/warning:")
    model_a, model_b = (m or NO_MODEL for m in cmp.models)
    st.markdown(f"**Embedding model**: A {md(model_a)} · B {md(model_b)}")
    if cmp.settings_diff:
        shown = {k: tuple(NO_MODEL if v is None else v for v in pair) for k, pair in cmp.settings_diff.items()}  # – : not saved
        st.markdown("**Settings changed**: " + md("; ".join(f"{k} {a} → {b}" for k, (a, b) in shown.items())))
    else:
        st.caption("Both runs used the same settings.")
    if not cmp.shared_cases:
        st.warning(
            "These runs share no answerable case: there is nothing to compare. Pick two runs of one eval set.",
            icon=":material/warning:",
        )
        return
    st.markdown(
        f"On **{cmp.shared_cases}** shared answerable cases, B is **{cmp.verdict}** on {metric} "
        f"(B − A = {cmp.chosen.delta:+.3f}, p = {'–' if cmp.chosen.p_value is None else f'{cmp.chosen.p_value:.4f}'})."
    )
    metric_deltas(cmp)
    causes_view.cause_changes(cmp)
    moved_cases(cmp, metric)


def metric_deltas(cmp: RunComparison) -> None:
    """Every metric's B − A with its interval, p and effect, as a table and a chart."""
    deltas = pd.DataFrame(
        [
            {
                "metric": m.metric,
                "A": m.a,
                "B": m.b,
                "B − A": m.delta,
                "95% low": m.ci_low,
                "95% high": m.ci_high,
                "p": m.p_value,
                "effect (d)": m.effect_size,
                "significant": m.significant,
            }
            for m in cmp.metrics
        ]
    )
    left, right = st.columns([3, 2])
    left.dataframe(
        deltas,
        hide_index=True,
        column_config={
            c: st.column_config.NumberColumn(c, format="%.3f") for c in deltas.columns if c not in ("metric", "significant")
        },
    )
    right.plotly_chart(charts.delta_intervals(deltas), width="stretch")


def moved_cases(cmp: RunComparison, metric: str) -> None:
    """The cases that improved or regressed; a selected one opens in Lookup with either run's settings."""
    moved = [("improved", c) for c in cmp.improved] + [("regressed", c) for c in cmp.regressed]
    st.markdown(
        f"**Cases that moved on {metric}**: {len(cmp.improved)} improved, {len(cmp.regressed)} regressed, "
        f"{cmp.unchanged} unchanged. Select a row to open the case in Lookup with either run's settings."
    )
    if not moved:
        return
    cases = pd.DataFrame(
        [
            {
                "case": c.case_id,
                "change": kind,
                "rank A": rank_text(c.rank_before),
                "rank B": rank_text(c.rank_after),
                f"{metric} A": c.before,
                f"{metric} B": c.after,
                "query": c.query,
            }
            for kind, c in moved
        ]
    )
    event = st.dataframe(
        cases,
        hide_index=True,
        on_select="rerun",
        selection_mode="single-row",
        key=CASES_KEY,
        column_config={
            "rank A": st.column_config.TextColumn(help=f"{NOT_FOUND}: no expected entry in run A's top 10"),
            "rank B": st.column_config.TextColumn(help=f"{NOT_FOUND}: no expected entry in run B's top 10"),
            "query": st.column_config.TextColumn(width="large"),
        },
    )
    rows = event.selection.rows if event is not None else []
    if rows and rows[0] < len(cases):
        case_links(cmp, cases.iloc[rows[0]])


def case_links(cmp: RunComparison, case: pd.Series) -> None:
    """Links that open the case in Lookup with run A's or run B's settings (all but a threshold left to the model)."""
    base = resources.base_settings()
    for name, run in (("A", cmp.run_a), ("B", cmp.run_b)):
        st.page_link(
            "pages/lookup.py",
            label=f"{md(case['case'])} in Lookup with run {name}'s settings ({md(run.run_id)})",
            icon=":material/open_in_new:",
            query_params=urls.run_lookup_params(str(case["query"]), run, base),
        )
    if any(r.settings.get("support_threshold") is None and base.support_threshold is not None for r in (cmp.run_a, cmp.run_b)):
        st.caption("A run left the support threshold to the model; the link cannot say so: clear it in the sidebar.")


def main() -> None:
    ctx = resources.page_context()
    store = RunStore(ctx.settings.invocation_db)
    st.title("Runs")
    st.caption(
        "Every eval run, from Evaluate or `python -m retrieval eval`, saved in the invocation store with its settings, "
        "code version and per-case ranks. Follow a set's metrics over time, and compare two runs: what changed, how sure "
        "(paired t-test on the cases both share), and for which cases."
    )
    try:
        sets = store.eval_sets()
    except LookupLabError as exc:
        render.error("The saved runs cannot be read", exc, "Check the invocation store named in the sidebar, then rerun.")
        return
    if not sets:
        st.info(
            "No saved runs yet: run an eval set on **Evaluate**, or `python -m retrieval eval SET.yaml`.", icon=":material/info:"
        )
        return
    picked, runs, config = pick_runs(store, sets)
    history_section(picked, runs, config)
    compare_section(store, runs, config)


main()
