"""Render an EvalReport: a plain-text table for the terminal, a self-contained HTML page for sharing."""

from __future__ import annotations

import html
import json

import pandas as pd
import plotly.graph_objects as go

from .evaluation import METRICS, ROUTING_FIGURES, EvalReport

REPORT_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2")  # one per metric, distinct


def metrics_frame(report: EvalReport) -> pd.DataFrame:
    return pd.DataFrame(report.metrics_table()).set_index("config")


HIGHER, LOWER = "▲", "▼"
ROUTING_COLUMNS = ROUTING_FIGURES
COLUMN_LABELS = {
    "filter_applied_rate": "filter applied",
    "routing_accuracy": "routing accuracy",
    "filter_excluded_rate": "filter excluded all",
    "fallback_rate": "fallback",
    "correct_supported_rate": "right + supported",
    "unanswerable_unsupported_rate": "unanswerable unsupported",
}
COLUMN_HELP = {
    "filter_applied_rate": "cases run with an L0-derived category filter / all cases",
    "routing_accuracy": "of the filtered cases naming an expected domain, share filtered on that domain",
    "filter_excluded_rate": "of the filtered answerable cases, share whose filter excluded every expected entry",
    "fallback_rate": "cases answered from L0 because L1 gave nothing usable / all cases",
    "correct_supported_rate": "of the answerable cases, share whose top result is right and claims semantic support",
    "unanswerable_unsupported_rate": "of the unanswerable cases, share returned without semantic support",
}


def significance_marks(report: EvalReport, reference: str = "lookup") -> dict[tuple[str, str], str]:
    """(config, metric) -> ▲ / ▼ when that config scores significantly higher / lower than `reference`."""
    marks = {}
    for pair in report.significance.get("pairs", []):
        if reference in (pair["a"], pair["b"]) and pair["significant"]:
            mine, theirs = ("a", "b") if pair["b"] == reference else ("b", "a")
            marks[(pair[mine], pair["metric"])] = HIGHER if pair[f"{mine}_score"] > pair[f"{theirs}_score"] else LOWER
    return marks


def significance_legend(report: EvalReport, reference: str = "lookup") -> str:
    return (
        f"{HIGHER} / {LOWER}: significantly higher / lower than {reference} (paired "
        f"{report.significance.get('stat_test', '')} test, p < 0.05); a blank cell does not apply"
    )


def metrics_display(report: EvalReport) -> pd.DataFrame:
    """The metrics table as people read it: three decimals, a blank where a figure does not apply, the
    significance mark beside the value, short column names (COLUMN_LABELS)."""
    marks = significance_marks(report)
    rows = {}
    for row in report.metrics_table():
        config = row["config"]
        rows[config] = {
            COLUMN_LABELS.get(c, c): _cell(row.get(c), marks.get((config, c), "")) for c in (*METRICS, *ROUTING_COLUMNS)
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "config"
    return frame


def _cell(value, mark: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return f"{value:.3f}" + (f" {mark}" if mark else "")


def metrics_text(report: EvalReport) -> str:
    table = metrics_display(report)
    widths = [max(len(c), 7) + 2 for c in table.columns]
    lines = [
        f"eval set: {report.eval_set}   cases: {report.settings['cases']} ({report.settings['answerable']} answerable)   "
        f"run tag: {report.run_tag}",
        f"{'config':<14}" + "".join(f"{c:>{w}}" for c, w in zip(table.columns, widths, strict=True)),
    ]
    for config, row in table.iterrows():
        lines.append(f"{config:<14}" + "".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)))
    lines.append(significance_legend(report))
    if report.filter_effect:
        counts, hurt = report.filter_effect["counts"], report.filter_effect["hurt_cases"]
        lines.append(
            "L0 filter (l1_filtered against l1_unfiltered): "
            + ", ".join(f"{k} {v}" for k, v in counts.items())
            + (f"; hurt cases: {', '.join(hurt)}" if hurt else "")
        )
    for w in report.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def metrics_figure(report: EvalReport) -> go.Figure:
    """The grouped bar chart of the metrics per configuration, one colour per metric."""
    table = metrics_frame(report)
    fig = go.Figure()
    for metric in METRICS:
        fig.add_bar(name=metric, x=list(table.index), y=[table.loc[c, metric] for c in table.index])
    # Its own template and colours: the default template is whatever the process set (Streamlit's, whose colours
    # are the app's theme variables and draw black outside the app).
    fig.update_layout(
        barmode="group",
        title="Metrics per configuration",
        yaxis_range=[0, 1],
        height=420,
        template="plotly_white",
        colorway=list(REPORT_COLORS),
    )
    return fig


def render_html(report: EvalReport) -> str:
    """One HTML file with its chart library inline: opens anywhere, no app, no network."""
    fig = metrics_figure(report)
    chart = fig.to_html(include_plotlyjs=True, full_html=False)
    sig = pd.DataFrame(report.significance.get("pairs", []))
    cases = pd.DataFrame(
        [
            {
                "case": c["id"],
                "query": c["query"],
                "expected": ", ".join(c["expected"]),
                "domain": c["domain"],
                "filter": c["routing"]["filter"],
                **{f"rank {k}": v["rank"] for k, v in c["configs"].items()},
            }
            for c in report.cases
        ]
    )
    conf = pd.DataFrame(report.confusion).T.fillna(0).astype(int) if report.confusion else pd.DataFrame()
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Lookup Lab eval: {e(report.eval_set)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px}th{background:#f3f3f3}</style></head><body>",
        f"<h1>Eval set {e(report.eval_set)}</h1>",
        f"<p>Run tag <code>{e(report.run_tag)}</code>, {e(report.created_at)}. "
        f"Settings: <code>{e(json.dumps(report.settings))}</code></p>",
        "".join(f"<p><b>Warning:</b> {e(w)}</p>" for w in report.warnings),
        "<h2>Metrics and routing</h2>",
        metrics_display(report).to_html(),
        f"<p>{e(significance_legend(report))}</p>",
        chart,
        f"<h2>Significance ({e(str(report.significance.get('stat_test')))}, p &lt; 0.05)</h2>",
        sig.to_html(index=False) if not sig.empty else "<p>none</p>",
        "<h2>Routing confusion: expected domain (rows) against the L0 filter (columns)</h2>",
        conf.to_html() if not conf.empty else "<p>none</p>",
        "<h2>Latency (ms)</h2>",
        pd.DataFrame(report.latency).T.to_html(float_format=lambda v: f"{v:.2f}", na_rep="-"),
        "<h2>Cases</h2>",
        cases.to_html(index=False, na_rep="-"),
        "</body></html>",
    ]
    return "\n".join(parts)
