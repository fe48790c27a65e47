"""Plotly figures for the pages (data in, figure out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from retrieval.evals.metric_names import metric_label

STAGE_LABELS = {"l0": "L0 match", "embed": "embedding", "l1": "L1 search", "fuse": "fuse + assess", "record": "recording"}
STAGE_COLORS = {"l0": "#f58518", "embed": "#72b7b2", "l1": "#4c78a8", "fuse": "#b279a2", "record": "#9d755d"}
VERDICT_COLORS = {"helped": "#54a24b", "hurt": "#e45756", "no change": "#9d9d9d", "not applied": "#d0d0d0"}
TICKS = {"minute": "%H:%M", "hour": "%b %d %H:%M", "day": "%b %d"}
STEP_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}  # at most one tick per bucket


def _time_axis(bucket: str) -> dict:
    return dict(title="", type="date", tickformat=TICKS.get(bucket), dtick=STEP_MS.get(bucket))


LAYER_COLORS = {"L0+L1": "#4c78a8", "L0": "#f58518", "L1": "#72b7b2", "none": "#bab0ac"}


def _compact(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), legend_title_text="")
    return fig


def latency_bar(timings_ms: Mapping[str, float]) -> go.Figure:
    """One horizontal bar, one segment per stage that ran (L0, embedding, L1, fuse, recording)."""
    fig = go.Figure()
    total = 0.0
    for stage in ("l0", "embed", "l1", "fuse", "record"):
        if stage not in timings_ms:
            continue
        ms = float(timings_ms[stage])
        total += ms
        fig.add_trace(
            go.Bar(
                x=[ms],
                y=["lookup"],
                orientation="h",
                name=f"{STAGE_LABELS[stage]} {ms:.1f} ms",
                marker_color=STAGE_COLORS[stage],
                hovertemplate=f"{STAGE_LABELS[stage]}: %{{x:.2f}} ms<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title=f"Latency per stage ({total:.1f} ms)",
        xaxis_title="ms",
        yaxis=dict(showticklabels=False),
        legend=dict(orientation="h", y=-0.5, traceorder="normal"),
    )
    return _compact(fig, 190)


def rank_shifts(rows: Sequence[Mapping[str, Any]], k: int) -> go.Figure:
    """Each entry's rank without and with the filter; an entry missing from one list sits at 'absent'."""
    absent = k + 1
    ids = [r["entry_id"] for r in rows]
    fig = go.Figure()
    for r in rows:
        a, b = r["rank_unfiltered"] or absent, r["rank_filtered"] or absent
        fig.add_trace(
            go.Scatter(
                x=[a, b],
                y=[r["entry_id"]] * 2,
                mode="lines",
                line=dict(color="#bbbbbb", width=2),
                showlegend=False,
                hoverinfo="skip",
            )
        )
    for name, col, color, symbol in (
        ("unfiltered", "rank_unfiltered", "#9d9d9d", "circle-open"),
        ("filtered", "rank_filtered", "#4c78a8", "circle"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[r[col] or absent for r in rows],
                y=ids,
                mode="markers",
                name=name,
                marker=dict(size=12, color=color, symbol=symbol, line=dict(width=2, color=color)),
                customdata=[[r["distance"]] for r in rows],
                hovertemplate="%{y}<br>rank %{x}<br>distance %{customdata[0]:.4f}<extra>" + name + "</extra>",
            )
        )
    fig.update_layout(
        title="Rank with and without the L0 filter",
        yaxis=dict(autorange="reversed", title=""),
        xaxis=dict(title="rank", tickvals=list(range(1, absent + 1)), ticktext=[str(i) for i in range(1, absent)] + ["absent"]),
        legend=dict(orientation="h", y=1.12),
    )
    return _compact(fig, 120 + 28 * max(len(rows), 3))


def delta_rr(frame: pd.DataFrame) -> go.Figure:
    """Per case the filter changed: reciprocal rank with the filter minus without it, coloured by verdict
    (the unchanged cases are counted in the caption, not drawn as empty slots)."""
    data = frame[frame["delta_rr"] != 0].sort_values(["delta_rr", "case_id"], ascending=[False, True])
    fig = px.bar(
        data,
        x="case_id",
        y="delta_rr",
        color="verdict",
        color_discrete_map=VERDICT_COLORS,
        hover_data={"query": True, "rr_unfiltered": ":.3f", "rr_filtered": ":.3f", "category": True},
        category_orders={"verdict": list(VERDICT_COLORS)},
        title="Change in reciprocal rank per case (filtered − unfiltered)",
    )
    fig.update_layout(xaxis=dict(title="case", type="category", showticklabels=len(data) <= 40), yaxis_title="Δ RR", bargap=0.1)
    return _compact(fig, 340)


def calls_over_time(frame: pd.DataFrame, bucket: str) -> go.Figure:
    fig = px.bar(
        frame, x="bucket", y="calls", color="layer", color_discrete_map=LAYER_COLORS, title=f"Calls per {bucket} by layer"
    )
    fig.update_layout(xaxis=_time_axis(bucket), yaxis_title="calls")
    return _compact(fig, 300)


def stage_latency(samples: pd.DataFrame) -> go.Figure:
    data = samples.assign(stage=samples["stage"].map(lambda s: STAGE_LABELS.get(s, s)))
    fig = px.box(
        data,
        x="stage",
        y="ms",
        color="stage",
        points="outliers",
        title="Latency per stage (ms)",
        color_discrete_map={STAGE_LABELS[k]: v for k, v in STAGE_COLORS.items()},
        category_orders={"stage": [STAGE_LABELS[s] for s in ("l0", "embed", "l1", "fuse")]},
    )
    # A log axis: one slow outlier (a cold model, a busy machine) would otherwise squash every box to a line.
    fig.update_layout(showlegend=False, xaxis_title="", yaxis=dict(type="log", title="ms (log scale)"))
    return _compact(fig, 300)


def fallback_rate(frame: pd.DataFrame, bucket: str) -> go.Figure:
    fig = px.line(
        frame, x="bucket", y="rate", markers=True, hover_data=["calls", "fallbacks"], title=f"Fallback rate per {bucket}"
    )
    fig.update_layout(yaxis=dict(tickformat=".0%", range=[0, 1.05], title=""), xaxis=_time_axis(bucket))
    return _compact(fig, 300)


LABEL_CHARS = 26  # a bar label longer than this is shortened in its middle (the whole of it is in the hover)


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` cut to `limit` characters in its middle: both ends of a long CamelCase name stay readable."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head) :]}"


def top_counts(frame: pd.DataFrame, label: str, title: str, color: str | None = None) -> go.Figure:
    """Horizontal bars of the most frequent labels; long labels shortened (and made unique), axis margin sized to them."""
    data = frame.iloc[::-1].copy()
    shown, seen = [], set()
    for value in data[label].astype(str):
        name = short_label(value)
        while name in seen:  # two long labels sharing both ends would draw as one bar
            name += " "
        seen.add(name)
        shown.append(name)
    data["shown"] = shown
    fig = px.bar(data, x="calls", y="shown", orientation="h", title=title, color=color, hover_name=label)
    fig.update_layout(yaxis_title="", xaxis_title="calls")
    fig.update_yaxes(automargin=True)
    return _compact(fig, 300)


OUTCOME_COLORS = {"right": "#54a24b", "wrong": "#e45756", "unanswerable": "#4c78a8"}


def support_estimates(points: Sequence[Mapping[str, Any]], threshold: float) -> go.Figure:
    """The support estimate (the chance that the top result is right) per case, one strip per outcome (right,
    wrong, unanswerable), with the claim threshold drawn: a trustworthy estimate puts right answers to its right
    and the rest to its left."""
    fig = go.Figure()
    for outcome, color in OUTCOME_COLORS.items():
        mine = [p for p in points if p["outcome"] == outcome and p.get("confidence") is not None]
        fig.add_box(
            x=[p["confidence"] for p in mine],
            name=f"{outcome} ({len(mine)})",
            marker_color=color,
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            text=[p["case"] for p in mine],
            orientation="h",
        )
    fig.add_vline(
        x=threshold,
        line_dash="dash",
        line_color="#555",
        annotation_text=f"support from {threshold:.2f}",
        annotation_position="top",
    )
    fig.update_layout(
        title="Support estimate (the chance that the top result is right) by outcome",
        xaxis_title="support estimate",
        xaxis_range=[0, 1],
        showlegend=False,
    )
    return _compact(fig, 320)


def reliability_figure(calibration: Mapping[str, Any]) -> go.Figure:
    """The support estimate's reliability diagram: per bin of the estimate, the share of top results that were right
    against the mean estimate, each point as large as its bin is full (its count written beside it), and the
    diagonal where "87% sure" means 87%."""
    bins = list(calibration.get("bins", []))
    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dash", color="#999"), name="perfectly calibrated")
    fig.add_scatter(
        x=[b["predicted"] for b in bins],
        y=[b["observed"] for b in bins],
        mode="lines+markers+text",
        text=[str(b["count"]) for b in bins],
        textposition="top center",
        marker=dict(size=[8 + 22 * (b["count"] / max(calibration.get("cases", 1), 1)) ** 0.5 for b in bins], color="#4c78a8"),
        customdata=[[b["low"], b["high"], b["count"]] for b in bins],
        hovertemplate="estimate %{customdata[0]:.1f}–%{customdata[1]:.1f}: %{customdata[2]} cases, "
        "mean estimate %{x:.2f}, right %{y:.2f}<extra></extra>",
        name="cases per bin",
    )
    fig.update_layout(
        title=f"Reliability of the support estimate (ECE {calibration.get('ece', 0):.3f})",
        xaxis_title="support estimate (mean of the bin)",
        yaxis_title="share whose top result was right",
        xaxis_range=[0, 1],
        yaxis_range=[-0.05, 1.08],
        showlegend=False,
    )
    return _compact(fig, 360)


SWEEP_MIN_SPAN = 0.05  # a sweep chart's colour or y range spans at least this much of the metric: 0.007 looks small


def difference_scale(values: Sequence[float]) -> tuple[float, float]:
    """The range of a chart of differences from the best (all ≤ 0): from the worst difference or −SWEEP_MIN_SPAN,
    whichever is lower, to 0."""
    lowest = min((v for v in values if v == v), default=0.0)
    return min(lowest, -SWEEP_MIN_SPAN), 0.0


def sweep_figure(frame: pd.DataFrame, names: Sequence[str], metric: str) -> go.Figure:
    """A sweep's points on `metric`: a heatmap over two swept settings, a line over one, parallel coordinates over
    more. Heatmap cells and the line read each point's difference from the best point (the best cell says 'best'),
    on a range of at least SWEEP_MIN_SPAN, so a gap of a few thousandths does not look like a chasm."""
    best, label = float(frame[metric].max()), metric_label(metric)
    title = f"{label} per point (in-sample),<br>against the best ({best:.3f})"  # two lines: one ran out of a phone
    if len(names) == 2:
        table = frame.pivot_table(index=names[1], columns=names[0], values=metric, aggfunc="first")
        diff = table.to_numpy(dtype=float) - best
        low, high = difference_scale(diff.ravel().tolist())
        text = [["best" if abs(v) < 5e-4 else ("–" if v != v else f"{v:+.3f}") for v in row] for row in diff]
        fig = go.Figure(
            go.Heatmap(
                z=diff.tolist(),  # lists: numpy arrays travel as base64 typed arrays
                x=[str(v) for v in table.columns],
                y=[str(v) for v in table.index],
                zmin=low,
                zmax=high,
                colorscale="Blues",
                text=text,
                texttemplate="%{text}",
                customdata=table.to_numpy(dtype=float).tolist(),
                hovertemplate=f"{names[0]}=%{{x}}<br>{names[1]}=%{{y}}<br>{label} %{{customdata:.3f}} (%{{text}})<extra></extra>",
                colorbar=dict(title=f"{label} − best"),
            )
        )
        # category axes: one tick per swept value, and the axes end with the grid (a linear axis ran past it)
        fig.update_layout(title=title, xaxis_title=names[0], yaxis_title=names[1])
        fig.update_xaxes(type="category")
        fig.update_yaxes(type="category")
    elif len(names) == 1:
        gaps = [float(v) - best for v in frame[metric]]
        low, _ = difference_scale(gaps)
        fig = go.Figure(go.Scatter(x=[str(v) for v in frame[names[0]]], y=gaps, mode="lines+markers", name=label))
        fig.update_layout(title=title, xaxis_title=names[0], yaxis_title=f"{label} − best", yaxis_range=[low * 1.05, -low * 0.05])
    else:
        dims = []
        for name in names:
            values = list(dict.fromkeys(frame[name]))
            code = {v: i for i, v in enumerate(values)}
            dims.append(
                dict(
                    label=name,
                    values=[code[v] for v in frame[name]],
                    tickvals=list(code.values()),
                    ticktext=[str(v) for v in values],
                )
            )
        low, _ = difference_scale((frame[metric].astype(float) - best).tolist())
        dims.append(dict(label=label, values=[float(v) for v in frame[metric]], range=[best + low, best]))
        fig = go.Figure(
            go.Parcoords(
                line=dict(color=frame[metric], colorscale="Blues", cmin=best + low, cmax=best, showscale=True),
                dimensions=dims,
            )
        )
        fig.update_layout(title=title)
    fig.update_layout(height=440, margin=dict(l=40, r=10, t=70, b=40))
    return fig


def metric_trend(history: pd.DataFrame, metrics: Sequence[str], title: str) -> go.Figure:
    """Saved runs' metrics over time, one line per metric (hover: the run id)."""
    ordered = history.sort_values("time")
    fig = go.Figure()
    for metric in metrics:
        fig.add_scatter(
            x=pd.to_datetime(ordered["time"]), y=ordered[metric], mode="lines+markers", name=metric, text=ordered["run_id"]
        )
    fig.update_traces(hovertemplate="%{text}<br>%{y:.3f}")
    fig.update_layout(title=title, yaxis_range=[0, 1.02], height=340, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def delta_intervals(deltas: pd.DataFrame) -> go.Figure:
    """Each metric's B − A with its 95% interval, and a line at no change."""
    fig = go.Figure(
        go.Scatter(
            x=deltas["B − A"],
            y=deltas["metric"],
            mode="markers",
            marker=dict(size=10),
            error_x=dict(
                type="data",
                symmetric=False,
                array=(deltas["95% high"] - deltas["B − A"]).fillna(0),
                arrayminus=(deltas["B − A"] - deltas["95% low"]).fillna(0),
            ),
        )
    )
    fig.add_vline(x=0, line_dash="dot")
    fig.update_layout(title="B − A with 95% intervals", height=260, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def metrics_bars(table: pd.DataFrame, metrics: Sequence[str]) -> go.Figure:
    """Each configuration's metrics as grouped bars."""
    fig = go.Figure()
    for metric in metrics:
        fig.add_bar(name=metric, x=list(table.index), y=[table.loc[c, metric] for c in table.index])
    fig.update_layout(
        barmode="group", title="Metrics per configuration", yaxis_range=[0, 1], height=360, margin=dict(l=10, r=10, t=40, b=10)
    )
    return fig


def fusion_parts(rows: Sequence[Mapping[str, Any]], entry: str, top: str) -> go.Figure:
    """One entry's parts of the fused score (each signal's weighted, scaled score and the named bonus) as bars beside
    the top result's."""
    signals = [str(r["signal"]) for r in rows]
    fig = go.Figure()
    for column, name, color in (("this entry", entry, "#e45756"), ("top result", top, "#4c78a8")):
        fig.add_bar(
            name=short_label(name, 40),
            y=signals,
            x=[float(r[column]) for r in rows],
            orientation="h",
            marker_color=color,
            hovertemplate=f"{name}<br>%{{y}}: %{{x:.4f}}<extra></extra>",
        )
    fig.update_layout(
        barmode="group",
        title="Fusion parts: this entry and the top result",
        xaxis_title="part of the fused score",
        yaxis=dict(autorange="reversed"),
        legend=dict(orientation="h", y=-0.3),
    )
    return _compact(fig, 300)
