"""How the Lookup page reads in chromium, on the runbooks corpus (its entry ids have hyphens), at 1280 and 390 wide: an
unanswerable query leads with its verdict, ids read as written, the results table shows its numbers inside a phone's
screen, and every lookup L1 answered links to the filter comparison in the lookup's own mode."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..conftest import needs_shared
from ..helpers.browser import (
    alert,
    assert_no_exception,
    enter_text,
    open_connected,
    open_page,
    rerun,
    shot,
    start_app,
    type_query,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SOURDOUGH = "how do I bake sourdough bread with rye flour"
HYPHENATED = "Prometheus operator is not ready"  # its answer: prometheus-operator/PrometheusOperatorNotReady


@pytest.fixture(scope="module")
def runbooks_app(tmp_path_factory, base_settings, request):
    needs_shared()
    request.getfixturevalue("runbooks_store")  # collection TestRunbooks, ingested once for the session
    from ..conftest import RUNBOOKS

    app = start_app(tmp_path_factory.mktemp("app-reading"), base_settings, collection="TestRunbooks", corpus=RUNBOOKS)
    yield app
    app.stop()


def compare_link(page):
    return page.locator('[data-testid="stPageLink-NavLink"]').filter(has_text="Compare filtered and unfiltered")


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_lookup_reads_right_on_a_desktop_and_a_phone(page, runbooks_app, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, runbooks_app)
    # an unanswerable query: the verdict first, then the nearest entry, never a heading of its own
    type_query(page, SOURDOUGH)
    assert_no_exception(page, "an unanswerable lookup")
    page.evaluate("window.scrollTo(0, 0)")
    verdict = alert(page, "Relevance:").first
    nearest = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="The nearest entry").first
    expect(verdict).to_be_visible()
    expect(nearest).to_be_visible()
    v, n = verdict.bounding_box(), nearest.bounding_box()
    assert v and n and v["y"] < n["y"], f"the nearest entry ({n}) comes before the verdict ({v}) at {width}"
    headings = [h.strip() for h in page.locator('[data-testid="stMain"] h3').all_inner_texts()]
    assert headings[:1] == ["No supported answer in the knowledge base"], headings
    # L1 answered it unfiltered: the comparison is offered all the same, in the lookup's mode
    expect(compare_link(page)).to_have_count(1)
    assert "ck=fusion" in (compare_link(page).get_attribute("href") or ""), compare_link(page).get_attribute("href")
    shot(page, f"runbooks-lookup-unanswerable-{width}")
    # an answerable query keeps its look: its title is the heading; its hyphenated id reads without a backslash
    type_query(page, HYPHENATED)
    assert_no_exception(page, "an answerable lookup")
    expect(page.get_by_role("heading", name=re.compile("Prometheus")).first).to_be_visible()
    page.get_by_text("Open a result's full entry").click()
    page.get_by_text(re.compile(r"^L1 candidates: ")).first.click()
    expect(page.locator('[data-testid="stTable"]').nth(1)).to_be_visible()
    text = main_text(page)
    assert "prometheus-operator/PrometheusOperatorNotReady" in text
    leaks = sorted(set(re.findall(r"\S*\\[-_.]\S*", text)))
    assert not leaks, f"Markdown escapes show on the page: {leaks[:5]}"
    # the results table: score and similarity inside the screen
    page.evaluate("window.scrollTo(0, 0)")
    table = page.locator('[data-testid="stTable"]').first
    for name in ("score", "similarity"):
        cell = table.locator("thead th").filter(has_text=re.compile(rf"^{name}$")).first
        box = cell.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, f"{name} is off-screen at {width}: {box}"
    href = compare_link(page).get_attribute("href") or ""
    assert "ck=fusion" in href and "cq=Prometheus" in href, href
    shot(page, f"runbooks-lookup-answerable-{width}")


def test_a_recorded_unanswerable_call_reads_as_no_supported_answer_on_invocations(page, runbooks_app):
    page.set_viewport_size({"width": 1280, "height": 800})
    open_connected(page, runbooks_app)
    type_query(page, SOURDOUGH)  # Enter: recorded
    open_page(page, runbooks_app, "invocations")
    enter_text(page.get_by_label("Text in the query"), "sourdough")
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    expect(grid.locator('[role="row"]').nth(1)).to_be_attached()
    box = grid.bounding_box()
    assert box is not None
    rerun(page, lambda: page.mouse.click(box["x"] + 18, box["y"] + 35 + 17))
    verdict = alert(page, "semantic support: no").first
    expect(verdict).to_be_visible()
    nearest = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="No supported answer in the knowledge base:")
    expect(nearest).to_be_visible()
    v, n = verdict.bounding_box(), nearest.bounding_box()
    assert v and n and v["y"] < n["y"], (v, n)  # the verdict, then what the entries below are
    assert_no_exception(page, "invocations")
