"""Evaluate: an eval set through the four configurations (retrieval.evals.evaluation.run_eval), metrics and routing."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from app_support import causes_view, charts, coverage_view, eval_ui, jobs, keys, render, resources, urls
from app_support.render import md
from retrieval.config import Settings
from retrieval.core.relevance import fit_words
from retrieval.evals.cases import CaseResult
from retrieval.evals.configs import DEPTH
from retrieval.evals.evaluation import METRICS, EvalReport, run_eval, support_points
from retrieval.evals.report import (
    COLUMN_HELP,
    COLUMN_LABELS,
    metrics_display,
    metrics_frame,
    reference_of,
    render_html,
    significance_frame,
    significance_legend,
    significance_test,
    unjudged_text,
)
from retrieval.evals.routing_metrics import HURT_MEANING
from retrieval.evals.settings_strip import depth_note


def latency_table(latency: dict) -> pd.DataFrame:
    """Milliseconds with one decimal as text; a stage a configuration does not have is '–' (the grid would say 'None')."""
    frame = pd.DataFrame(latency).T
    return frame.map(lambda v: "–" if v is None or pd.isna(v) else f"{float(v):.1f}")


def run_section(ctx: resources.AppContext) -> dict[str, str] | None:
    """The eval set, the configurations and the Run button; the view the shown report is compared with."""
    settings = ctx.settings
    picked = eval_ui.pick_fitting_set(ctx, key=keys.EVAL_RUN_SET)
    if picked is None:
        return None
    eval_set, path = picked
    l1_ready = ctx.store is not None and settings.l1_enabled
    if l1_ready:
        eval_ui.offer_ingest(ctx, key="ingest_for_run")
    else:
        st.info(
            "L1 is off or unavailable: only `l0_only` can run. Switch L1 on (or reconnect) for the other configurations.",
            icon=":material/info:",
        )
    configs = eval_ui.pick_configs(settings, l1_ready=l1_ready)
    # an eval ranks at least DEPTH entries whatever the app's top_k (run_eval): the strip says what the run will use, and why
    depth = max(DEPTH, settings.top_k)
    note = depth_note(depth, settings.top_k)
    render.settings_strip(settings.with_(top_k=depth), label="The next run's settings", key="eval_next_settings", note=note)
    record = recording(ctx, configs)
    view = eval_ui.run_view(settings, label=eval_ui.eval_set_label(path), configurations=", ".join(configs))
    label = f"Run {len(eval_set.cases)} cases × {len(configs)} configurations"
    if st.button(label, type="primary", key="run_eval", disabled=not configs):
        report = jobs.run_job(
            "The evaluation stopped",
            lambda bar: run_eval(eval_set, ctx.lookup_services(record=record), settings, configs=configs, progress=bar.counts),
            fix="Fix what it names (see the sidebar status) and run it again.",
            when_down="Check that Weaviate is up (Retry connection) and run it again.",
            start="evaluating…",
        )
        if report is None:
            return None
        saved = None if ctx.read_only else eval_ui.save_run(ctx, report, eval_set)
        st.session_state[keys.EVAL_REPORT] = (view, report, saved)
        st.session_state[keys.EVAL_SCROLL] = True
    return view


def recording(ctx: resources.AppContext, configs: list[str]) -> bool:
    """Whether the run records its lookups: never when the app is read-only (which is said)."""
    if ctx.read_only:
        st.info(
            f"**Read-only** ({md(ctx.access.reason)}): a run here is neither saved on the Runs page nor recorded in the "
            "invocation store; download its JSON or HTML report to keep it.",
            icon=":material/lock:",
        )
    return (
        st.checkbox(
            "Record the lookups in the invocation store (session tag = the run tag)",
            value=not ctx.read_only,
            key=f"{keys.EVAL_RECORD}-{ctx.read_only}",
            disabled="lookup" not in configs or ctx.read_only,
        )
        and not ctx.read_only
    )


def metrics_section(report: EvalReport, saved: str | None, sidebar_top_k: int) -> None:
    """The run's tag, settings and metrics, as a table and bars."""
    for warning in report.warnings:
        st.warning(md(warning), icon=":material/warning:")
    st.markdown(
        f"Run tag **{md(report.run_tag)}**: {report.settings['cases']} cases, {report.settings['answerable']} answerable."
    )
    note = depth_note(report.settings.get("top_k", DEPTH), sidebar_top_k)
    render.settings_strip(report.settings, label="Settings of this run", key="eval_run_settings", note=note)
    if saved:
        st.caption(f"Saved as run **{md(saved)}**: compare it with other runs on the Runs page.")
    st.table(metrics_display(report))  # text cells: three decimals, blanks, marks; wraps to the page's width
    coverage_view.coverage_figure(report)
    st.caption(
        md(significance_legend(report)) + ". " + "; ".join(f"*{md(COLUMN_LABELS[c])}*: {md(h)}" for c, h in COLUMN_HELP.items())
    )
    if report.settings["answerable"]:
        st.plotly_chart(charts.metrics_bars(metrics_frame(report), list(METRICS)), width="stretch")
    else:
        st.caption(
            "This set has no answerable case: hit@1, recall@5, MRR and nDCG do not apply, so no metrics chart. "
            "What counts here is *unanswerable unsupported* (above, and in the support chart below)."
        )


def support_section(report: EvalReport) -> None:
    """How often `lookup` claimed support rightly, its estimate per case, and the estimate's calibration."""
    lookup_routing = report.routing["lookup"]
    st.markdown(
        f"**Semantic support** of `lookup`: right and supported "
        f"{render.rate(lookup_routing.get('correct_supported_rate'))} of answerable cases; "
        f"unanswerable left unsupported {render.rate(lookup_routing.get('unanswerable_unsupported_rate'))}."
    )
    auc = lookup_routing.get("support_auc")
    st.caption(
        "The support estimate is the chance that the top result is right, from its similarity, its margin over the next "
        "entry, its BM25F score per query word and the signals' agreement; support is claimed at or above the threshold. "
        f"Its AUC here (right top results against wrong and unanswerable ones): {'–' if auc is None else round(auc, 3)}."
    )
    chart = charts.support_estimates(support_points(report), float(report.settings.get("support_threshold") or 0.5))
    st.plotly_chart(chart, width="stretch")
    calibration = report.calibration.get("lookup")
    if not calibration:
        return
    st.markdown(
        f"**Calibration** of the support estimate: predicted hit@1 (the mean estimate) "
        f"**{calibration['predicted_hit1']:.3f}** against measured **{calibration['hit1']:.3f}** "
        f"({calibration['gap']:+.3f}); expected calibration error **{calibration['ece']:.3f}**."
    )
    st.caption(
        "Each point is a bin of the estimate: how many cases fell in it, their mean estimate and the share whose top "
        "result was right. On the dashed line, an estimate of 87% is right 87% of the time. "
        f"{md(fit_words(calibration.get('fit')))}."
    )
    st.plotly_chart(charts.reliability_figure(calibration), width="stretch", key="eval_reliability")


def filter_section(report: EvalReport, settings: Settings) -> None:
    """The cases the L0 filter hurt, each a link to Lookup."""
    if not report.filter_effect:
        st.caption("Run `l1_unfiltered` and `l1_filtered` together to see which cases the L0 filter helped or hurt.")
        return
    effect = report.filter_effect
    hurt = effect["hurt_cases"]
    st.markdown(
        f"**Cases the filter hurt** ({len(hurt)} of {sum(effect['counts'].values())}; helped "
        f"{effect['counts']['helped']}): {md(HURT_MEANING)}, `l1_filtered` against `l1_unfiltered`, "
        "as on Filter comparison."
    )
    by_id = {c.id: c for c in report.cases}
    for case_id in hurt:
        query = by_id[case_id].query
        st.page_link(
            "pages/lookup.py",
            label=f"{md(case_id)}: {md(query)}",
            icon=":material/open_in_new:",
            query_params=urls.lookup_params(query, settings, resources.base_settings()),
        )


def details_section(report: EvalReport) -> None:
    """Significance, routing confusion, latency and every case, each in an expander; the JSON and HTML downloads."""
    with st.expander(f"Significance against {report.significance.get('reference', 'lookup')}"):
        st.caption(md(significance_test(report)) + ": each configuration against the reference, on each metric.")
        st.dataframe(significance_frame(report), hide_index=True)
    with st.expander("Routing confusion: expected domain (rows) against the L0 filter (columns)"):
        st.dataframe(pd.DataFrame(report.confusion).T.fillna(0).astype(int) if report.confusion else pd.DataFrame())
    with st.expander("Latency per configuration (ms)"):
        st.dataframe(latency_table(report.latency))
        st.caption("p50 / p95 per stage; – : the configuration has no such stage.")
    with st.expander(f"All {len(report.cases)} cases"):
        rows = [case_row(c, reference_of(report)) for c in report.cases]
        st.dataframe(pd.DataFrame(rows), hide_index=True)
    downloads = st.container(horizontal=True)  # each button as wide as its label, wrapping on a narrow screen
    downloads.download_button(
        "Download JSON",
        data=json.dumps(report.to_dict(), default=str, ensure_ascii=False),
        file_name=f"{report.run_tag}.json",
        mime="application/json",
        on_click="ignore",
        key="eval_json",
        wrap=True,
    )
    downloads.download_button(
        "Download HTML report",
        data=render_html(report),
        file_name=f"{report.run_tag}.html",
        mime="text/html",
        on_click="ignore",
        key="eval_html",
        wrap=True,
    )


def case_row(case: CaseResult, reference: str) -> dict[str, object]:
    return {
        "case": case.id,
        "query": case.query,
        "expected": ", ".join(case.expected),
        "filter": case.filter,
        **{f"rank {k}": v.rank for k, v in case.configs.items()},
        f"unjudged in {reference}'s top-{DEPTH}": unjudged_text(case, reference),
    }


def main() -> None:
    ctx = resources.page_context()
    st.title("Evaluate")
    st.caption(
        "Run an eval set through the configurations on the same cases: hit@1, recall@5, MRR@10, nDCG@10 "
        "(ranx), paired significance against `lookup`, and how the L0 routing behaved."
    )
    view = run_section(ctx)
    stored = st.session_state.get(keys.EVAL_REPORT)
    if view is None or stored is None:
        return
    eval_ui.settings_changed(stored[0], view)  # the last run stays on screen, marked, until the next one
    report = stored[1]
    with st.container(key="eval_results"):
        metrics_section(report, stored[2] if stored[2:] else None, ctx.settings.top_k)
        if "lookup" in report.configs:
            support_section(report)
        causes_view.causes_section(report, ctx.settings)
        filter_section(report, ctx.settings)
        details_section(report)
    if st.session_state.pop(keys.EVAL_SCROLL, False):
        render.scroll_to("eval_results", report.run_tag)


main()
