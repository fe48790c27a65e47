"""The charts of the HTML report as inline SVG: no script, no chart library, a few kilobytes each, drawn the same
in a browser, a mail client or a printout. Every text that reaches the SVG is escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

FONT = "font-family='system-ui,sans-serif' font-size='12'"
OUTCOME_COLORS = {"right": "#54a24b", "wrong": "#e45756", "unanswerable": "#4c78a8"}


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _frame(width: int, height: int, title: str, body: list[str], label: str) -> str:
    return (
        f"<svg class='chart' role='img' aria-label='{_e(label)}' xmlns='http://www.w3.org/2000/svg' width='{width}' "
        f"height='{height}' viewBox='0 0 {width} {height}' {FONT}><rect width='100%' height='100%' fill='white'/>"
        f"<text x='10' y='20' font-size='15' font-weight='600'>{_e(title)}</text>{''.join(body)}</svg>"
    )


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    colors: Sequence[str],
    *,
    title: str,
    y_max: float = 1.0,
    width: int = 900,
    height: int = 340,
) -> str:
    """Vertical bars: one group per x label, one bar per series (a missing value draws no bar), a legend."""
    left, top, bottom, right = 44, 56, 40, 10
    plot_w, plot_h = width - left - right, height - top - bottom
    body = []
    for i in range(5):  # grid lines and their values
        value = y_max * i / 4
        y = top + plot_h - plot_h * i / 4
        body.append(f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ddd'/>")
        body.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{value:.2f}</text>")
    names = list(series)
    slot = plot_w / max(len(groups), 1)
    bar = slot * 0.8 / max(len(names), 1)
    for g, group in enumerate(groups):
        x0 = left + slot * g + slot * 0.1
        for s, name in enumerate(names):
            raw = series[name][g]
            if raw is None or raw != raw:
                continue
            value = float(raw)
            h = plot_h * max(0.0, min(value, y_max)) / y_max
            x, y = x0 + bar * s, top + plot_h - h
            body.append(
                f"<rect class='bar' x='{x:.1f}' y='{y:.1f}' width='{bar * 0.92:.1f}' height='{h:.1f}' "
                f"fill='{colors[s % len(colors)]}'><title>{_e(group)} {_e(name)}: {value:.3f}</title></rect>"
            )
        body.append(f"<text x='{left + slot * (g + 0.5):.1f}' y='{height - bottom + 16}' text-anchor='middle'>{_e(group)}</text>")
    x = left
    for s, name in enumerate(names):  # the legend, under the title
        body.append(f"<rect x='{x}' y='30' width='12' height='12' fill='{colors[s % len(colors)]}'/>")
        body.append(f"<text x='{x + 16}' y='40'>{_e(name)}</text>")
        x += 24 + 7 * len(name)
    return _frame(width, height, title, body, title)


def counts_bars(counts: Mapping[str, int], *, title: str, color: str = "#4c78a8", width: int = 600) -> str:
    """Horizontal bars, one per label, with the count written at the bar's end."""
    left, row, top = 110, 26, 34
    height = top + row * len(counts) + 12
    most = max([*counts.values(), 1])
    body = []
    for i, (label, n) in enumerate(counts.items()):
        y = top + row * i
        w = (width - left - 50) * n / most
        body.append(f"<text x='{left - 8}' y='{y + 15}' text-anchor='end'>{_e(label)}</text>")
        body.append(f"<rect class='bar' x='{left}' y='{y + 3}' width='{w:.1f}' height='{row - 8}' fill='{color}'/>")
        body.append(f"<text x='{left + w + 6:.1f}' y='{y + 15}'>{int(n)}</text>")
    return _frame(width, height, title, body, title)


def support_strips(points: Sequence[Mapping[str, Any]], threshold: float, *, title: str, width: int = 900) -> str:
    """The support estimate per case, one strip per outcome (right, wrong, unanswerable), the claim threshold
    dashed: a trustworthy estimate puts right answers to its right and the rest to its left."""
    left, right, top, row = 140, 20, 40, 46
    height = top + row * len(OUTCOME_COLORS) + 34
    plot_w = width - left - right
    body = []
    for i in range(6):
        x = left + plot_w * i / 5
        body.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{height - 30}' stroke='#eee'/>")
        body.append(f"<text x='{x:.1f}' y='{height - 14}' text-anchor='middle'>{i / 5:.1f}</text>")
    for r, (outcome, color) in enumerate(OUTCOME_COLORS.items()):
        mine = [p for p in points if p["outcome"] == outcome and p.get("confidence") is not None]
        y = top + row * r + row / 2
        body.append(f"<text x='{left - 8}' y='{y + 4:.1f}' text-anchor='end'>{_e(outcome)} ({len(mine)})</text>")
        for j, p in enumerate(mine):
            jitter = ((j * 7919) % 17 - 8) * 1.6  # spread the dots of a strip without randomness
            x = left + plot_w * max(0.0, min(float(p["confidence"]), 1.0))
            body.append(
                f"<circle cx='{x:.1f}' cy='{y + jitter:.1f}' r='3.5' fill='{color}' fill-opacity='0.75'>"
                f"<title>{_e(p['case'])}: {float(p['confidence']):.2f}</title></circle>"
            )
    tx = left + plot_w * threshold
    body.append(f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{top - 4}' y2='{height - 30}' stroke='#555' stroke-dasharray='5,4'/>")
    body.append(f"<text x='{tx + 4:.1f}' y='{top + 6}' fill='#555'>support from {threshold:.2f}</text>")
    return _frame(width, height, title, body, title)


def reliability_diagram(calibration: Mapping[str, Any], *, title: str, width: int = 520, height: int = 380) -> str:
    """The support estimate's reliability diagram: per bin, the share of right top results against the mean estimate
    (a dot as large as its bin is full, its count beside it), and the dashed diagonal of a calibrated estimate."""
    left, right, top, bottom = 54, 16, 40, 44
    plot_w, plot_h = width - left - right, height - top - bottom

    def at(x: float, y: float) -> tuple[float, float]:
        return left + plot_w * x, top + plot_h * (1 - y)

    body = []
    for i in range(6):
        v = i / 5
        x, _ = at(v, 0)
        _, y = at(0, v)
        body.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{top + plot_h}' stroke='#eee'/>")
        body.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>")
        body.append(f"<text x='{x:.1f}' y='{top + plot_h + 16}' text-anchor='middle'>{v:.1f}</text>")
        body.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{v:.1f}</text>")
    (x0, y0), (x1, y1) = at(0, 0), at(1, 1)
    body.append(f"<line x1='{x0}' y1='{y0}' x2='{x1}' y2='{y1}' stroke='#999' stroke-dasharray='5,4'/>")
    body.append(f"<text x='{left + plot_w / 2}' y='{height - 8}' text-anchor='middle'>support estimate (mean of the bin)</text>")
    body.append(
        f"<text x='14' y='{top + plot_h / 2}' transform='rotate(-90 14 {top + plot_h / 2})' text-anchor='middle'>right</text>"
    )
    cases = max(int(calibration.get("cases", 1)), 1)
    points = [(at(float(b["predicted"]), float(b["observed"])), b) for b in calibration.get("bins", [])]
    if len(points) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for (x, y), _ in points)
        body.append(f"<polyline points='{path}' fill='none' stroke='#4c78a8' stroke-width='1.5'/>")
    for (x, y), b in points:
        r = 3 + 9 * (int(b["count"]) / cases) ** 0.5
        body.append(
            f"<circle class='bin' cx='{x:.1f}' cy='{y:.1f}' r='{r:.1f}' fill='#4c78a8' fill-opacity='0.8'><title>"
            f"{float(b['low']):.1f}–{float(b['high']):.1f}: {int(b['count'])} cases, mean estimate "
            f"{float(b['predicted']):.2f}, right {float(b['observed']):.2f}</title></circle>"
        )
        body.append(f"<text x='{x + r + 3:.1f}' y='{y - 3:.1f}' fill='#555'>{int(b['count'])}</text>")
    return _frame(width, height, title, body, title)
