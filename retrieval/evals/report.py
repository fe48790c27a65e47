"""Render an EvalReport: a plain-text table for the terminal, a self-contained HTML page for sharing."""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from retrieval.evals import report_charts as charts
from retrieval.evals.cases import CaseResult
from retrieval.evals.causes import cause_table
from retrieval.evals.configs import DEPTH
from retrieval.evals.coverage import COVERAGE_KEY, COVERAGE_MEANING, UNJUDGED, traffic_sentence
from retrieval.evals.evaluation import METRICS, ROUTING_FIGURES, EvalReport, support_points
from retrieval.evals.routing_metrics import HURT_MEANING
from retrieval.evals.settings_strip import strip_text

REPORT_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2")  # one per metric, distinct


def metrics_frame(report: EvalReport) -> pd.DataFrame:
    return pd.DataFrame(report.metrics_table()).set_index("config")


HIGHER, LOWER = "▲", "▼"
ROUTING_COLUMNS = ROUTING_FIGURES
COLUMN_LABELS = {
    COVERAGE_KEY: COVERAGE_KEY,
    "filter_applied_rate": "filter applied",
    "routing_accuracy": "routing accuracy",
    "filter_excluded_rate": "filter excluded all",
    "fallback_rate": "fallback",
    "correct_supported_rate": "right + supported",
    "unanswerable_unsupported_rate": "unanswerable unsupported",
}
COLUMN_HELP = {
    COVERAGE_KEY: COVERAGE_MEANING,
    "filter_applied_rate": "cases run with an L0-derived category filter / all cases",
    "routing_accuracy": "of the filtered cases naming an expected domain, share filtered on that domain",
    "filter_excluded_rate": "of the filtered answerable cases, share whose filter excluded every expected entry",
    "fallback_rate": "cases answered from L0 because L1 gave nothing usable / all cases",
    "correct_supported_rate": "of the answerable cases, share whose top result is right and claims semantic support",
    "unanswerable_unsupported_rate": "of the unanswerable cases, share returned without semantic support",
}


def reference_of(report: EvalReport) -> str:
    """The configuration the significance was tested against, as the JSON names it (`lookup` unless it did not run)."""
    return str(report.significance.get("reference") or "lookup")


def significance_marks(report: EvalReport, reference: str | None = None) -> dict[tuple[str, str], str]:
    """(config, metric) -> ▲ / ▼ when that config scores significantly higher / lower than `reference` (the report's)."""
    reference = reference or reference_of(report)
    marks = {}
    for pair in report.significance.get("pairs", []):
        if reference in (pair["a"], pair["b"]) and pair["significant"]:
            mine, theirs = ("a", "b") if pair["b"] == reference else ("b", "a")
            marks[(pair[mine], pair["metric"])] = HIGHER if pair[f"{mine}_score"] > pair[f"{theirs}_score"] else LOWER
    return marks


def significance_test(report: EvalReport) -> str:
    """How the significance was tested, in words: 'paired student test, Holm-corrected over 20 tests, p < 0.05'."""
    sig = report.significance
    tests = sig.get("tests", len(sig.get("pairs", [])))
    corrected = f", Holm-corrected over {tests} tests" if sig.get("correction") == "holm" else ", uncorrected"
    return f"paired {sig.get('stat_test', '')} test{corrected}, p < {sig.get('alpha', 0.05)}"


def significance_legend(report: EvalReport) -> str:
    return (
        f"{HIGHER} / {LOWER}: significantly higher / lower than {reference_of(report)} (the reference) "
        f"({significance_test(report)}); "
        "a blank cell does not apply"
    )


def metrics_display(report: EvalReport) -> pd.DataFrame:
    """The metrics table as people read it: three decimals, a blank where a figure does not apply, the
    significance mark beside the value, short column names (COLUMN_LABELS)."""
    marks = significance_marks(report)
    rows = {}
    for row in report.metrics_table():
        config = row["config"]
        rows[config] = {
            COLUMN_LABELS.get(c, c): _cell(row.get(c), marks.get((config, c), ""))
            for c in (*METRICS, COVERAGE_KEY, *ROUTING_COLUMNS)
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
    lines.append(coverage_text(report))
    if report.filter_effect:
        counts, hurt = report.filter_effect["counts"], report.filter_effect["hurt_cases"]
        lines.append(
            "L0 filter (l1_filtered against l1_unfiltered): "
            + ", ".join(f"{k} {v}" for k, v in counts.items())
            + (f"; hurt cases: {', '.join(hurt)}" if hurt else "")
        )
    lines.extend(causes_text(report))
    for w in report.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def causes_text(report: EvalReport) -> list[str]:
    """The misses by cause, a row per cause and a column per configuration (evals.causes)."""
    rows = cause_table(report)
    width = max(len(r["cause"]) for r in rows) + 2
    cols = [max(len(c), 4) + 2 for c in report.configs]
    out = ["misses by cause (expected entry not first; an unanswerable case answered with support):"]
    out.append(f"{'':<{width}}" + "".join(f"{c:>{w}}" for c, w in zip(report.configs, cols, strict=True)))
    for r in rows:
        out.append(f"{r['cause']:<{width}}" + "".join(f"{r[c]:>{w}}" for c, w in zip(report.configs, cols, strict=True)))
    return out


def coverage_text(report: EvalReport) -> str:
    """What the judged@k column means and, for a set built from recorded calls, how much of it was judged."""
    if not report.coverage:
        return f"{COVERAGE_KEY}: unknown (this run did not measure judgment coverage)"
    meaning = f"{COVERAGE_KEY}: {COVERAGE_MEANING}"
    if report.coverage.get("judged") == "complete":
        meaning += "; this set says judged: complete, so every entry it does not list is judged not relevant"
    sentence = traffic_sentence(report.coverage)
    return meaning + (f"\n{sentence}" if sentence else "")


def unjudged_text(case: CaseResult, config: str) -> str:
    """The entries of a configuration's top-k without a judgment, each marked, or '–'."""
    found = case.unjudged(config, DEPTH)
    return ", ".join(f"{e} ({UNJUDGED})" for e in found) or "–"


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


def fmt(value: Any, digits: int = 3) -> str:
    """A figure as people read it: '–' where it does not apply, yes/no, thousands separated, `digits` decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def fmt_p(value: float | None) -> str:
    """A p-value: three decimals, or '< 0.001' (never 9.788707e-04)."""
    if value is None or math.isnan(value):
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def setting_text(value: Any) -> str:
    """A setting's value: weights as written (2.5, not 2.500), lists joined."""
    if isinstance(value, float) and not math.isnan(value):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return fmt(value)


def significance_frame(report: EvalReport) -> pd.DataFrame:
    """One row per configuration and metric tested against the reference: both scores, the raw and the Holm p."""
    reference = reference_of(report)
    rows = [
        {
            "configuration": p["a"],
            "metric": p["metric"],
            "score": fmt(p.get("a_score")),
            f"{p['b']}": fmt(p.get("b_score")),
            "p": fmt_p(p.get("p_value")),
            "p (Holm)": fmt_p(p.get("p_holm")),
            "significant": fmt(bool(p.get("significant"))),
        }
        for p in report.significance.get("pairs", [])
        if p["b"] == reference
    ]
    return pd.DataFrame(rows)


def created_text(created_at: str) -> str:
    """An ISO timestamp as people read it: 2026-12-04 04:31 UTC (the text as given when it is not one)."""
    try:
        moment = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return str(created_at)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _table(frame: pd.DataFrame, *, index: bool = False) -> str:
    return frame.to_html(index=index, escape=True, na_rep="–", border=0) if not frame.empty else "<p>none</p>"


def report_charts(report: EvalReport) -> list[tuple[str, str]]:
    """(heading, inline SVG) of the report's charts: the metrics (when a case has an answer), the support
    estimate of `lookup`, and what the L0 filter did (when l1_filtered and l1_unfiltered both ran)."""
    out = []
    if report.settings.get("answerable"):
        table = metrics_frame(report)
        series = {m: [_num(table.loc[c, m]) for c in table.index] for m in METRICS}
        out.append(("Metrics", charts.grouped_bars(list(table.index), series, REPORT_COLORS, title="Metrics per configuration")))
    if "lookup" in report.configs:
        threshold = float(report.settings.get("support_threshold") or 0.5)
        title = "Support estimate of lookup (the chance that the top result is right) by outcome"
        out.append(("Semantic support", charts.support_strips(support_points(report), threshold, title=title)))
    calibration = report.calibration.get("lookup")
    if calibration:
        title = (
            f"Reliability of lookup's support estimate: predicted hit@1 {calibration['predicted_hit1']:.3f}, "
            f"measured {calibration['hit1']:.3f}, ECE {calibration['ece']:.3f}"
        )
        out.append(("Calibration of the support estimate", charts.reliability_diagram(calibration, title=title, width=900)))
    if report.filter_effect:
        counts = report.filter_effect["counts"]
        out.append(("The L0 filter", charts.counts_bars(counts, title="l1_filtered against l1_unfiltered, per answerable case")))
    return out


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def render_html(report: EvalReport) -> str:
    """One self-contained HTML file that reads on its own: formatted figures, a settings table, the charts as
    inline SVG (no script, no chart library: a few hundred kilobytes for hundreds of cases, fit for e-mail)."""
    reference = reference_of(report)
    cases = pd.DataFrame(
        [
            {
                "case": c.id,
                "query": c.query,
                "expected": ", ".join(c.expected) or "– (unanswerable)",
                "domain": c.domain or "–",
                "filter": c.filter or "–",
                **{f"rank {k}": fmt(v.rank) for k, v in c.configs.items()},
                f"unjudged in {reference}'s top-{DEPTH}": unjudged_text(c, reference),
            }
            for c in report.cases
        ]
    )
    conf = pd.DataFrame(report.confusion).T.fillna(0).astype(int) if report.confusion else pd.DataFrame()
    latency = pd.DataFrame(report.latency).T.map(lambda v: fmt(_num(v), 1)) if report.latency else pd.DataFrame()
    settings = pd.DataFrame([{"setting": k, "value": setting_text(v)} for k, v in report.settings.items()])
    effect = report.filter_effect
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Lookup Lab eval: {e(report.eval_set)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;"
        "font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f3f3f3}"
        "svg.chart{display:block;max-width:100%;height:auto;margin:1em 0}</style></head><body>",
        f"<h1>Eval set {e(report.eval_set)}</h1>",
        f"<p>Run tag <code>{e(report.run_tag)}</code>, {e(created_text(report.created_at))}: "
        f"{fmt(report.settings.get('cases'))} cases, {fmt(report.settings.get('answerable'))} answerable.</p>",
        f"<p><b>Settings of this run</b>: <code>{e(strip_text(report.settings))}</code></p>",
        "".join(f"<p><b>Warning:</b> {e(w)}</p>" for w in report.warnings),
        "<h2>Metrics and routing</h2>",
        metrics_display(report).reset_index().to_html(index=False, border=0),
        f"<p>{e(significance_legend(report))}</p>",
        "".join(f"<p><i>{e(COLUMN_LABELS[c])}</i>: {e(h)}</p>" for c, h in COLUMN_HELP.items()),
        "<h2>Judgment coverage</h2>",
        "".join(f"<p>{e(line)}</p>" for line in coverage_text(report).splitlines()),
        *(f"<h2>{e(heading)}</h2>{svg}" for heading, svg in report_charts(report)),
        (
            f"<p>The filter helped {effect['counts'].get('helped', 0)} and hurt {effect['counts'].get('hurt', 0)} cases"
            f"{': ' + e(', '.join(effect['hurt_cases'])) if effect.get('hurt_cases') else ''}. "
            f"A case is hurt when {e(HURT_MEANING)}.</p>"
            if effect
            else ""
        ),
        f"<h2>Significance against {e(reference_of(report))} ({e(significance_test(report))})</h2>",
        _table(significance_frame(report)),
        "<h2>Every setting</h2>",
        _table(settings),
        "<h2>Routing confusion: expected domain (rows) against the L0 filter (columns)</h2>",
        _table(conf, index=True),
        "<h2>Latency (ms, p50 and p95 per stage)</h2>",
        _table(latency, index=True),
        "<h2>Cases</h2>",
        _table(cases),
        "</body></html>",
    ]
    return "\n".join(parts)
