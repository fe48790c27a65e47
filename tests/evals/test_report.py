"""The report renderers on a small hand-built EvalReport; the exported HTML opened in Debian's chromium."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest

from retrieval.config import REPO_ROOT
from retrieval.evals.coverage import COVERAGE_KEY, coverage_figures
from retrieval.evals.evaluation import EvalReport
from retrieval.evals.report import (
    REPORT_COLORS,
    created_text,
    metrics_display,
    metrics_figure,
    metrics_text,
    render_html,
    significance_frame,
    significance_legend,
)

from ..conftest import CHROMIUM, needs_chromium

SHOTS = REPO_ROOT / "test-artifacts" / "screenshots"


def tiny_report() -> EvalReport:
    """Three configurations on four cases; l0_only is significantly worse than lookup on mrr@10."""
    metrics = {
        "l0_only": {"hit@1": 0.25, "recall@5": 0.5, "mrr@10": 0.3125, "ndcg@10": 0.4},
        "l1_filtered": {"hit@1": 0.5, "recall@5": 0.75, "mrr@10": 0.6153846153846154, "ndcg@10": 0.66},
        "lookup": {"hit@1": 0.75, "recall@5": 1.0, "mrr@10": 0.9519230769230769, "ndcg@10": 0.9},
    }
    routing = {
        "l0_only": {
            "filter_applied_rate": 0.0,
            "routing_accuracy": None,
            "filter_excluded_rate": None,
            "fallback_rate": 0.0,
            "correct_supported_rate": 0.0,
            "unanswerable_unsupported_rate": None,
        },
        "l1_filtered": {
            "filter_applied_rate": 0.75,
            "routing_accuracy": 1.0,
            "filter_excluded_rate": 0.0,
            "fallback_rate": 0.0,
            "correct_supported_rate": 0.5,
            "unanswerable_unsupported_rate": None,
        },
        "lookup": {
            "filter_applied_rate": 0.75,
            "routing_accuracy": 1.0,
            "filter_excluded_rate": 0.0,
            "fallback_rate": 0.25,
            "correct_supported_rate": 0.75,
            "unanswerable_unsupported_rate": None,
        },
    }
    pairs = [
        {
            "a": "l0_only",
            "b": "lookup",
            "metric": "mrr@10",
            "p_value": 0.01,
            "significant": True,
            "a_score": 0.3125,
            "b_score": 0.9519,
        },
        {
            "a": "l1_filtered",
            "b": "lookup",
            "metric": "mrr@10",
            "p_value": 0.2,
            "significant": False,
            "a_score": 0.6154,
            "b_score": 0.9519,
        },
    ]
    cases = [
        {
            "id": f"c{i}",
            "query": f"query {i}",
            "expected": {"x/A": 1},
            "domain": "x",
            "routing": {"l0_domains": ["x"], "filter": "x"},
            "configs": {c: {"rank": 1, "rr": 1.0, "ranking": ["x/A"]} for c in metrics},
        }
        for i in range(4)
    ]
    return EvalReport(
        eval_set="tiny",
        run_tag="eval-tiny-1",
        created_at="2026-12-01T08:00:00+00:00",
        settings={"top_k": 10, "cases": 4, "answerable": 4},
        configs=tuple(metrics),
        metrics=metrics,
        significance={
            "stat_test": "student",
            "alpha": 0.05,
            "reference": "lookup",
            "correction": "holm",
            "tests": 2,
            "pairs": [{**p, "p_holm": min(1.0, p["p_value"] * 2)} for p in pairs],
        },
        routing=routing,
        confusion={"x": {"x": 3, "(none)": 1}},
        latency={c: {"total_p50": 10.0} for c in metrics},
        cases=cases,
        warnings=[],
    )


def test_the_report_chart_brings_its_own_template_and_colours():
    import plotly.io as pio
    import streamlit  # noqa: F401 - as in the app's process: Streamlit makes its own template the default

    assert pio.templates.default == "streamlit"
    layout = metrics_figure(tiny_report()).to_dict()["layout"]
    assert layout["colorway"] == list(REPORT_COLORS) and len(set(REPORT_COLORS)) == len(REPORT_COLORS)
    assert layout["template"]["layout"]["paper_bgcolor"] == "white"  # plotly_white, spelled out in the figure


def test_metrics_display_three_decimals_blanks_and_marks():
    table = metrics_display(tiny_report())
    assert list(table.index) == ["l0_only", "l1_filtered", "lookup"]
    assert table.loc["lookup", "mrr@10"] == "0.952"  # not 0.9519230769230769
    assert table.loc["l0_only", "mrr@10"] == "0.312 ▼"  # significantly lower than lookup
    assert table.loc["l1_filtered", "mrr@10"] == "0.615"  # not significant: no mark
    assert table.loc["l0_only", "routing accuracy"] == ""  # does not apply: blank, not None
    assert table.loc["lookup", "fallback"] == "0.250"
    for value in table.to_numpy().ravel():
        assert value == "" or len(value.split(" ")[0]) == 5, value


def test_an_upward_mark_when_a_configuration_beats_lookup():
    report = tiny_report()
    report.significance["pairs"][0].update(a_score=0.99, b_score=0.9519)
    assert metrics_display(report).loc["l0_only", "mrr@10"] == "0.312 ▲"


def test_text_and_html_use_the_same_cells_and_legend():
    report = tiny_report()
    text, page = metrics_text(report), render_html(report)
    assert "0.312 ▼" in text and "0.9519230769230769" not in text and "None" not in text
    assert "significantly higher / lower than lookup" in text
    table = page.split("<h2>Metrics and routing</h2>")[1].split("<div")[0]  # the table and its legend, before the chart
    assert "0.312 ▼" in table and "significantly higher / lower than lookup" in table
    assert "0.9519230769230769" not in table and "None" not in table


def _hex(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


@pytest.mark.browser
def test_the_exported_report_has_distinct_series_colours_in_the_browser(tmp_path):
    """Opened from disk with no app and no network: every metric's bars in its own colour, in the DOM and on
    the screenshot (Streamlit's template drew them all black; the chart is inline SVG now)."""
    needs_chromium()
    import streamlit  # noqa: F401 - the report is written by the app's process
    from PIL import Image
    from playwright.sync_api import sync_playwright

    path = tmp_path / "report.html"
    path.write_text(render_html(tiny_report()), encoding="utf-8")
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "eval-report-chart.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.goto(path.as_uri())
            page.wait_for_selector("svg.chart rect.bar", timeout=60_000)
            fills = page.eval_on_selector_all(
                "svg.chart[aria-label='Metrics per configuration'] rect.bar",
                "els => [...new Set(els.map(r => getComputedStyle(r).fill))]",
            )
            page.locator("svg.chart").first.screenshot(path=str(shot))
        finally:
            browser.close()
    assert len(fills) == 4, fills  # one fill per metric
    wanted = {_hex(c) for c in REPORT_COLORS[:4]}
    image = Image.open(shot).convert("RGB")
    seen = {px for _, px in image.getcolors(maxcolors=1 << 20)}
    found = {w for w in wanted if any(sum(abs(a - b) for a, b in zip(w, px, strict=True)) <= 12 for px in seen)}
    assert found == wanted, f"series colours on the screenshot: {sorted(found)} of {sorted(wanted)}"


def big_report(cases: int = 400) -> EvalReport:
    """Every configuration on `cases` cases (a tenth unanswerable), with support estimates, a filter effect and a
    p-value small enough to print in scientific notation."""
    base = tiny_report()
    configs = ("l0_only", "l1_unfiltered", "l1_filtered", "bm25", "hybrid", "lookup")
    rows = []
    for i in range(cases):
        answerable = i % 10 != 0
        rows.append(
            {
                "id": f"Case{i:04d}",
                "query": f"query number {i} about <b>disk</b> & pods",
                "expected": {f"x/E{i}": 1} if answerable else {},
                "domain": "x" if answerable else None,
                "routing": {"l0_domains": ["x"], "filter": "x" if i % 3 else None},
                "configs": {
                    c: {
                        "rank": (i % 7) + 1 if answerable else None,
                        "rr": 1 / ((i % 7) + 1) if answerable else 0.0,
                        "ranking": [f"x/E{i}"] + [f"x/F{j}" for j in range(9)],
                        "category": "x",
                        "layer": "L0+L1",
                        "l1_status": "ok",
                        "fallback": False,
                        "semantic_support": i % 2 == 0,
                        "support_score": 0.7,
                        "support_lexical": 3.2,
                        "confidence": (i % 100) / 100,
                    }
                    for c in configs
                },
            }
        )
    pairs = [{**base.significance["pairs"][0], "a": c, "p_value": 9.788707e-04} for c in configs[:-1]]
    settings = {
        "top_k": 10,
        "vector_weight": 2.5,
        "search_mode": "fusion",
        "support_threshold": 0.42,
        "cases": cases,
        "answerable": cases - cases // 10,
        "collection": "Kb_runbooks_bge_small",
    }
    effect = {"counts": {"helped": 12, "hurt": 3, "no_change": 300, "not_applied": 45}, "hurt_cases": ["Case0001"]}
    return replace(
        base,
        settings=settings,
        configs=configs,
        metrics={c: dict(base.metrics["lookup"]) for c in configs},
        routing={c: dict(base.routing["lookup"]) for c in configs},
        significance={"stat_test": "student", "alpha": 0.05, "pairs": pairs},
        latency={c: {"total_p50": 12.3456, "total_p95": None, "l1_p50": 3.0} for c in configs},
        cases=rows,
        filter_effect={**effect, "helped_cases": [], "definition": "hurt"},
    )


def visible_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(style|title)>.*?</\1>", " ", page, flags=re.S)))


def test_the_html_report_fits_an_email_and_reads_on_its_own():
    page = render_html(big_report())
    assert len(page.encode("utf-8")) <= 1_500_000, len(page.encode("utf-8"))
    assert page.count("<script") <= 1  # no chart library (the charts are SVG); never one per chart
    text = visible_text(page)
    assert "e-04" not in page and "< 0.001" in text  # p = 9.788707e-04
    assert "None" not in text and "NaN" not in text
    settings = page.split("<h2>Every setting</h2>")[1].split("<h2>")[0]
    for name, value in (("vector_weight", "2.5"), ("top_k", "10"), ("search_mode", "fusion"), ("support_threshold", "0.42")):
        assert re.search(rf"<td>{name}</td>\s*<td>{re.escape(value)}</td>", settings), name
    assert "{" not in settings  # a table, not raw JSON
    labels = re.findall(r"<svg class='chart' role='img' aria-label='([^']+)'", page)
    assert labels[0] == "Metrics per configuration"
    assert any(label.startswith("Support estimate of lookup") for label in labels)
    assert any(label.startswith("l1_filtered against l1_unfiltered") for label in labels)
    assert "12.3" in text and "12.3456" not in text  # latency: one decimal
    assert "&lt;b&gt;disk&lt;/b&gt; &amp; pods" in page and "<b>disk</b>" not in page  # case text escaped


def test_an_unanswerable_only_report_draws_no_metrics_chart():
    report = replace(big_report(20), settings={"cases": 20, "answerable": 0})
    labels = re.findall(r"aria-label='([^']+)'", render_html(report))
    assert "Metrics per configuration" not in labels and labels  # the support and filter charts remain


def test_the_report_opens_with_its_settings_and_a_readable_time():
    report = replace(
        tiny_report(),
        created_at="2026-12-01T08:00:12.345678+00:00",
        settings={
            "embedding_model": "bge-small-en-v1.5",
            "search_mode": "near_vector",
            "vector_weight": 2.5,
            "lexical_weight": 1.0,
            "top_k": 10,
            "support_threshold": 0.42,
            "cases": 4,
            "answerable": 4,
        },
    )
    page = render_html(report)
    head = page.split("<h2>")[0]
    assert "2026-12-01 08:00 UTC" in head and "08:00:12" not in page and ".345678" not in page
    strip = re.search(r"Settings of this run</b>: <code>([^<]+)</code>", head)
    assert strip is not None, head
    assert "embedding_model=bge-small-en-v1.5" in strip.group(1) and "search_mode=near_vector" in strip.group(1)
    assert "top_k=10" in strip.group(1) and "support_threshold=0.42" in strip.group(1)
    assert "lexical_weight" not in strip.group(1)  # near_vector fuses no BM25F list: its weight is not a setting of the run


def test_the_metrics_table_has_one_header_row_and_the_hurt_definition_is_a_sentence():
    report = replace(tiny_report(), filter_effect={"counts": {"helped": 1, "hurt": 0}, "hurt_cases": []})
    page = render_html(report)
    table = page.split("<h2>Metrics and routing</h2>")[1].split("</table>")[0]
    head = table.split("<thead>")[1].split("</thead>")[0]
    assert head.count("<tr") == 1, head  # no row holding the index's name alone
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head)[0] == "config"
    assert "<th></th>" not in table
    text = visible_text(page)
    assert "hurt 0 cases. A case is hurt when the expected entry ranks lower" in text


def test_significance_is_against_lookup_with_holm_and_says_so():
    report = tiny_report()
    frame = significance_frame(report)
    assert list(frame["configuration"]) == ["l0_only", "l1_filtered"] and "lookup" in frame.columns
    assert list(frame["p (Holm)"]) == ["0.020", "0.400"] and list(frame["p"]) == ["0.010", "0.200"]
    page = render_html(report)
    assert "<h2>Significance against lookup (paired student test, Holm-corrected over 2 tests, p &lt; 0.05)</h2>" in page


def test_a_timestamp_that_is_not_one_reads_as_given():
    assert created_text("2026-12-01T09:30:00+01:00") == "2026-12-01 08:30 UTC"
    assert created_text("yesterday") == "yesterday"


def test_the_report_draws_the_reliability_of_the_support_estimate():
    from retrieval.evals.reliability import reliability

    rel = reliability([0.95, 0.9, 0.85, 0.3, 0.2], [True, True, False, False, False]).to_dict()
    page = render_html(replace(tiny_report(), calibration={"lookup": rel}))
    labels = re.findall(r"aria-label='([^']+)'", page)
    (label,) = [x for x in labels if x.startswith("Reliability of lookup")]
    assert f"predicted hit@1 {rel['predicted_hit1']:.3f}" in label and f"ECE {rel['ece']:.3f}" in label
    diagram = page.split(f"aria-label='{label}'")[1].split("</svg>")[0]
    assert diagram.count("<circle class='bin'") == len(rel["bins"]) == 4  # bins 0.2, 0.3, 0.8 and 0.9
    assert "stroke-dasharray='5,4'" in diagram  # the diagonal of a calibrated estimate
    assert "<h2>Calibration of the support estimate</h2>" in page
    assert not [x for x in re.findall(r"aria-label='([^']+)'", render_html(tiny_report())) if x.startswith("Reliability")]


def test_a_run_without_lookup_names_its_own_reference_in_marks_legend_and_html():
    """When `lookup` did not run, the significance is against another configuration: the marks, the legend and the
    HTML report all name that reference, as the JSON does (they said "than lookup" and drew no mark)."""
    report = tiny_report()
    pair = {"a": "l1_filtered", "b": "l0_only", "metric": "mrr@10", "p_value": 0.01, "p_holm": 0.02, "significant": True}
    report = replace(
        report,
        configs=("l0_only", "l1_filtered"),
        significance={
            **report.significance,
            "reference": "l0_only",
            "tests": 1,
            "pairs": [{**pair, "a_score": 0.6, "b_score": 0.3}],
        },
    )
    assert metrics_display(report).loc["l1_filtered", "mrr@10"] == "0.615 ▲"
    assert "significantly higher / lower than l0_only (the reference)" in significance_legend(report)
    page = html.unescape(render_html(report))
    assert "than l0_only" in page and "than lookup" not in page


def covered_report(**invocations: str) -> EvalReport:
    """The tiny report whose cases rank x/A then x/B and x/C: one judged result in three, c0 also judging x/B."""
    report = tiny_report()
    cases = []
    for case in report.to_dict()["cases"]:
        case["configs"] = {c: {**o, "ranking": ["x/A", "x/B", "x/C"]} for c, o in case["configs"].items()}
        case["not_relevant"] = ["x/B"] if case["id"] == "c0" else []
        case["invocation"] = invocations.get(case["id"])
        cases.append(case)
    report = replace(report, cases=cases)
    figures = coverage_figures(report.cases, report.configs, judged="listed", in_judgments_folder=False)
    return replace(report, coverage=figures)


def test_the_coverage_column_text_and_html_mark_unjudged_results():
    report = covered_report()
    assert report.coverage["configs"]["lookup"] == {"judged": 5, "results": 12, "share": round(5 / 12, 4)}
    assert metrics_display(report).loc["lookup", COVERAGE_KEY] == "0.417"
    text = metrics_text(report)
    assert f"{COVERAGE_KEY}: share of the top-10 results that carry a judgment" in text and "0.417" in text
    page = render_html(report)
    assert "<h2>Judgment coverage</h2>" in page
    cases = page.split("<h2>Cases</h2>")[1]
    assert "unjudged in lookup&#x27;s top-10" in cases or "unjudged in lookup's top-10" in cases
    rows = re.findall(r"<tr>\s*<td>(c\d)</td>.*?</tr>", cases, flags=re.S)
    assert rows == ["c0", "c1", "c2", "c3"]
    c0 = re.search(r"<td>c0</td>.*?</tr>", cases, flags=re.S).group(0)
    c1 = re.search(r"<td>c1</td>.*?</tr>", cases, flags=re.S).group(0)
    assert "x/C (unjudged)" in c0 and "x/B (unjudged)" not in c0
    assert "x/B (unjudged), x/C (unjudged)" in c1
    assert "recorded calls" not in page  # a curated set says nothing of traffic


def test_a_set_from_recorded_calls_says_how_much_was_judged_in_text_and_html():
    report = covered_report(c0="inv-0", c1="inv-1")
    sentence = "2 of its 4 cases were judged from recorded calls; judgment coverage 50% of their top-10"
    assert sentence in metrics_text(report) and sentence in visible_text(render_html(report))


def test_a_report_from_before_coverage_reads_as_unknown():
    report = tiny_report()  # no coverage, as a saved JSON from before it was measured
    assert report.coverage == {} and metrics_display(report).loc["lookup", COVERAGE_KEY] == ""
    assert f"{COVERAGE_KEY}: unknown" in metrics_text(report)
    assert f"{COVERAGE_KEY}: unknown" in visible_text(render_html(report))
