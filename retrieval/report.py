"""Render an EvalReport: a plain-text table for the terminal, a self-contained HTML page for sharing."""

from __future__ import annotations

import html
import json

import pandas as pd
import plotly.graph_objects as go

from .evaluation import METRICS, EvalReport


REPORT_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2")  # one per metric, distinct


def _fmt(v) -> str:
    return "-" if v is None or (isinstance(v, float) and v != v) else f"{v:.3f}" if isinstance(v, float) else str(v)


def metrics_frame(report: EvalReport) -> pd.DataFrame:
    return pd.DataFrame(report.metrics_table()).set_index("config")


def significance_marks(report: EvalReport, reference: str = "lookup") -> dict[tuple[str, str], str]:
    """(config, metric) -> '*' when that config differs significantly from `reference` on that metric."""
    marks = {}
    for pair in report.significance.get("pairs", []):
        if reference in (pair["a"], pair["b"]) and pair["significant"]:
            other = pair["b"] if pair["a"] == reference else pair["a"]
            marks[(other, pair["metric"])] = "*"
    return marks


def metrics_text(report: EvalReport) -> str:
    marks = significance_marks(report)
    cols = list(METRICS) + ["filter_applied_rate", "routing_accuracy", "filter_excluded_rate", "fallback_rate",
                            "correct_supported_rate", "unanswerable_unsupported_rate"]
    lines = [f"eval set: {report.eval_set}   cases: {report.settings['cases']} ({report.settings['answerable']} answerable)   run tag: {report.run_tag}",
             f"{'config':<14}" + "".join(f"{c:>21}" for c in cols)]
    for row in report.metrics_table():
        cells = "".join(f"{_fmt(row[c]) + marks.get((row['config'], c), ''):>21}" for c in cols)
        lines.append(f"{row['config']:<14}{cells}")
    lines.append(f"* significantly different from lookup (paired {report.significance.get('stat_test', '')} test, p < 0.05)")
    if report.filter_effect:
        counts, hurt = report.filter_effect["counts"], report.filter_effect["hurt_cases"]
        lines.append("L0 filter (l1_filtered against l1_unfiltered): " + ", ".join(f"{k} {v}" for k, v in counts.items())
                     + (f"; hurt cases: {', '.join(hurt)}" if hurt else ""))
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
    fig.update_layout(barmode="group", title="Metrics per configuration", yaxis_range=[0, 1], height=420,
                      template="plotly_white", colorway=list(REPORT_COLORS))
    return fig


def render_html(report: EvalReport) -> str:
    """One HTML file with its chart library inline: opens anywhere, no app, no network."""
    table = metrics_frame(report)
    fig = metrics_figure(report)
    chart = fig.to_html(include_plotlyjs=True, full_html=False)
    sig = pd.DataFrame(report.significance.get("pairs", []))
    cases = pd.DataFrame([
        {"case": c["id"], "query": c["query"], "expected": ", ".join(c["expected"]), "domain": c["domain"],
         "filter": c["routing"]["filter"], **{f"rank {k}": v["rank"] for k, v in c["configs"].items()}}
        for c in report.cases
    ])
    conf = pd.DataFrame(report.confusion).T.fillna(0).astype(int) if report.confusion else pd.DataFrame()
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Lookup Lab eval: {e(report.eval_set)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px}th{background:#f3f3f3}</style></head><body>",
        f"<h1>Eval set {e(report.eval_set)}</h1>",
        f"<p>Run tag <code>{e(report.run_tag)}</code>, {e(report.created_at)}. Settings: <code>{e(json.dumps(report.settings))}</code></p>",
        "".join(f"<p><b>Warning:</b> {e(w)}</p>" for w in report.warnings),
        "<h2>Metrics and routing</h2>", table.to_html(float_format=lambda v: f"{v:.3f}", na_rep="-"),
        chart,
        f"<h2>Significance ({e(str(report.significance.get('stat_test')))}, p &lt; 0.05)</h2>",
        sig.to_html(index=False) if not sig.empty else "<p>none</p>",
        "<h2>Routing confusion: expected domain (rows) against the L0 filter (columns)</h2>",
        conf.to_html() if not conf.empty else "<p>none</p>",
        "<h2>Latency (ms)</h2>", pd.DataFrame(report.latency).T.to_html(float_format=lambda v: f"{v:.2f}", na_rep="-"),
        "<h2>Cases</h2>", cases.to_html(index=False, na_rep="-"),
        "</body></html>",
    ]
    return "\n".join(parts)
