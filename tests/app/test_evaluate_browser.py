"""Evaluate and Runs in a real chromium (Playwright), against the session's real embedded Weaviate (conftest)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..helpers.browser import assert_no_exception, enter_text, open_connected, rerun, start_app

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory, base_settings, sample_store):
    app = start_app(tmp_path_factory.mktemp("app-evaluate"), base_settings, collection="TestSample")
    yield app
    app.stop()


def chips(page) -> list[str]:
    """The chips of the Configurations box, as their labels read."""
    tags = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Configurations").locator("[data-tag]")
    return [t.get_attribute("aria-label") or "" for t in tags.all()]


def run_eval(page) -> None:
    """Click Run and wait until the run is over and its metrics table is drawn."""
    rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Run \d+ cases")).click())
    expect(page.locator('[data-testid="stTable"]').first).to_be_visible()


def metrics_rows(page) -> list[str]:
    table = page.locator('[data-testid="stTable"] table').first
    return [r.strip() for r in table.locator("tbody th").all_inner_texts()]


def test_lookup_stays_in_a_run_after_the_sidebar_mode_changes(page, sample_app):
    """Run in fusion, switch the sidebar to near_vector, run again: lookup is still run (its chip, whose label named the
    mode, was dropped by the box), so the reference and the saved run keep it."""
    page.set_viewport_size({"width": 1280, "height": 800})
    open_connected(page, sample_app, "evaluate")
    run_eval(page)
    assert "lookup" in metrics_rows(page)
    sidebar = page.get_by_test_id("stSidebarUserContent")
    rerun(page, lambda: sidebar.get_by_text("near_vector", exact=True).click())
    run_eval(page)
    assert_no_exception(page, "evaluate")
    assert "lookup" in metrics_rows(page), f"lookup dropped from the run: {metrics_rows(page)}"
    expect(page.get_by_text("significantly higher / lower than lookup (the reference)").first).to_be_visible()


def whole(locator) -> bool:
    """Nothing in the element is cut: no part of it scrolls (a truncated label or chip has scrollWidth > clientWidth)."""
    return locator.evaluate("el => [el, ...el.querySelectorAll('*')].every(n => n.scrollWidth <= n.clientWidth + 1)")


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_run_scrolls_to_the_results_and_nothing_is_cut(page, sample_app, width, height):
    """After Run, the results come into view (the page stayed at the Run button, the results below the fold); the
    Configurations chips and the download buttons read whole ("Download HTML re…", the last chip clipped)."""
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app, "evaluate")
    box = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Configurations")
    tags = box.locator("[data-tag]")
    expect(tags.first).to_be_visible()
    right = box.bounding_box()["x"] + box.bounding_box()["width"]
    for i in range(tags.count()):
        tag = tags.nth(i)
        edge = tag.bounding_box()["x"] + tag.bounding_box()["width"]
        assert whole(tag) and edge <= right + 1, f"chip {tag.get_attribute('aria-label')!r} is cut at {width} px"
    run_eval(page)
    tag_line = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text=re.compile(r"^Run tag")).first
    in_view = "el => { const r = el.getBoundingClientRect(); return r.top >= -1 && r.top < window.innerHeight / 2; }"
    page.wait_for_function(in_view, arg=tag_line.element_handle(), timeout=15_000)  # the results' first line, on screen
    for name in ("Download JSON", "Download HTML report"):
        button = page.get_by_role("button", name=name)
        button.scroll_into_view_if_needed()
        expect(button).to_be_visible()
        assert whole(button), f"{name} is cut at {width} px"


def test_a_fusion_weight_typed_in_the_sidebar_is_kept_in_the_url_and_used(page, sample_app):
    """vector weight 3 from the URL, BM25F weight 0.5 typed in the sidebar's expander: the URL carries both, and the
    next run's settings say so (it took lookup.yaml or LOOKUP_VECTOR_WEIGHT and a restart)."""
    page.set_viewport_size({"width": 1280, "height": 800})
    open_connected(page, sample_app, "evaluate?vw=3")
    sidebar = page.get_by_test_id("stSidebarUserContent")
    sidebar.get_by_text("Fusion weights, depth and support").click()
    expect(sidebar.get_by_role("spinbutton", name="Vector weight")).to_have_value("3")
    box = sidebar.get_by_role("spinbutton", name="BM25F weight")
    enter_text(box, "0.5")
    expect(page).to_have_url(re.compile(r"[?&]lw=0\.5"))
    expect(page).to_have_url(re.compile(r"[?&]vw=3"))
    chips = page.locator(".st-key-eval_next_settings code").all_inner_texts()
    assert "vector_weight=3" in chips and "lexical_weight=0.5" in chips, chips


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_coverage_figure_sits_beside_the_metrics_and_reads_whole(page, sample_app, width, height):
    """After a run, the judgment coverage of lookup's top-10 is shown under the metrics table, its figure a
    percentage, the sentence saying how many results the metrics count as not relevant; nothing cut on a phone."""
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app, "evaluate?es=eval_sets/sample-ops-issue-titles.yaml")
    run_eval(page)
    assert_no_exception(page, "evaluate")
    figure = page.locator(".st-key-eval_coverage")
    figure.scroll_into_view_if_needed()
    metric = figure.locator('[data-testid="stMetric"]')
    expect(metric).to_be_visible()
    expect(metric.locator('[data-testid="stMetricLabel"]')).to_have_text(re.compile(r"Judgment coverage of lookup's top-10"))
    value = metric.locator('[data-testid="stMetricValue"]').inner_text().strip()
    caption = figure.locator('[data-testid="stCaptionContainer"]').inner_text()
    counts = re.search(r"(\d+) of (\d+) results carry a judgment; the metrics count the other (\d+)", caption)
    assert counts, caption
    judged, results, other = (int(g) for g in counts.groups())
    assert value == f"{judged / results:.0%}" and other == results - judged, (value, caption)
    assert whole(metric) and whole(figure), f"the coverage figure is cut at {width} px"
    table = page.locator('[data-testid="stTable"]').first
    assert figure.bounding_box()["y"] >= table.bounding_box()["y"] + table.bounding_box()["height"] - 1  # right under it
