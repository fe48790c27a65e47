"""Why not this entry? in a real chromium (Playwright), on the session's real Weaviate, at 1280×800 and 390×844: an entry
picked under Lookup's results shows its verdict; a miss opened from Evaluate lands on Lookup with its verdict; a read-only
app explains and runs what it would take, and the invocation store's row counts stay as they were."""

from __future__ import annotations

import re
from urllib.parse import quote_plus

import pytest
from playwright.sync_api import expect

from ..helpers.browser import (
    WAIT_MS,
    alert,
    assert_no_exception,
    open_connected,
    open_page,
    rerun,
    shot,
    start_app,
    type_query,
    wait_idle,
)
from ..helpers.db_rows import changed, table_rows
from .test_why_not_page import INODE_ENTRY, INODES, WHY_SET

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SIZES = [(1280, 800), (390, 844)]
INODE_TITLE = "Filesystem has run out of inodes"


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory, base_settings, sample_store):
    tmp = tmp_path_factory.mktemp("app-why-not")
    (tmp / "judged-eval-sets").mkdir()  # the judgments folder beside invocations.duckdb: Evaluate lists judged/why-not.yaml
    (tmp / "judged-eval-sets" / "why-not.yaml").write_text(WHY_SET, encoding="utf-8")
    app = start_app(tmp, base_settings, collection="TestSample")
    yield app
    app.stop()


def fits(page, width: int, where: str) -> None:
    """Nothing makes the page scroll sideways."""
    wide = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollWidth")
    assert wide <= width, f"{where} scrolls sideways at {width}: {wide}"


def pick(page, typed: str, option: str) -> None:
    """Type part of an entry's title into the Why not picker and pick the option that reads `option`."""
    box = page.get_by_role("combobox", name="Why not this entry?")
    box.scroll_into_view_if_needed()
    box.click()
    box.fill(typed)
    rerun(page, lambda: page.get_by_role("option", name=option).click())


def verdict(page):
    return alert(page, "Why not").first


@pytest.mark.parametrize("width, height", SIZES)
def test_pick_an_entry_under_the_results_and_read_its_verdict(page, sample_app, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app)
    type_query(page, INODES)
    pick(page, "run out of inodes", f"{INODE_TITLE} — {INODE_ENTRY}")
    assert_no_exception(page, "why not, picked")
    expect(verdict(page)).to_contain_text(f"Why not {INODE_TITLE}?")
    expect(verdict(page)).to_contain_text("rank 2, in the top 5: lost in the fusion (rank 2): BM25F")
    expect(page).to_have_url(re.compile(r"[?&]why=storage%2FInodeExhaustion"))
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Fusion parts")
    expect(chart).to_be_visible()
    # the verdict comes before the stages and the chart
    v, c = verdict(page).bounding_box(), chart.bounding_box()
    assert v and c and v["y"] < c["y"], (v, c)
    fits(page, width, "Lookup with an entry explained")
    shot(page, f"sample-lookup-why-not-{width}")


@pytest.mark.parametrize("width, height", SIZES)
def test_a_miss_opened_from_evaluate_shows_its_verdict_on_lookup(page, sample_app, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app, "evaluate?es=" + quote_plus("judged/why-not.yaml"))
    rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Run 3 cases")).click())
    assert_no_exception(page, "evaluate")
    causes = page.locator('[data-testid="stTable"]').filter(has_text="in the lists, lost in the fusion")
    expect(causes).to_be_visible()
    cells = [c.strip() for c in causes.locator("thead th").all_inner_texts()]
    assert cells[0] == "configuration" and "in the lists, lost in the fusion" in cells and cells[-1] == "misses", cells
    body = causes.locator("tbody tr").all()
    rows = {r[0]: r[1:] for r in ([c.strip() for c in row.locator("th, td").all_inner_texts()] for row in body)}
    assert list(rows) == ["l0_only", "l1_unfiltered", "l1_filtered", "bm25", "hybrid", "lookup"], rows
    assert rows["lookup"][cells.index("in the lists, lost in the fusion") - 1] == "2" and rows["lookup"][-1] == "2", rows
    whole = causes.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    assert whole, f"the causes table scrolls sideways at {width}"
    fits(page, width, "Evaluate with its causes")
    shot(page, f"sample-evaluate-causes-{width}")
    misses = page.locator('[data-testid="stExpander"]').filter(has_text="Missed cases of lookup (2)")  # open at first
    link = misses.get_by_role("link", name=f"inodes: in the lists, lost in the fusion (why not {INODE_ENTRY})")
    assert "l1=false" not in (link.get_attribute("href") or ""), link.get_attribute("href")
    link.scroll_into_view_if_needed()
    with page.context.expect_page() as opened:  # a new tab: Evaluate keeps its run
        link.click()
    lookup = opened.value
    lookup.set_viewport_size({"width": width, "height": height})
    lookup.set_default_timeout(WAIT_MS)
    expect(verdict(lookup)).to_contain_text(f"Why not {INODE_TITLE}?")
    expect(verdict(lookup)).to_contain_text("rank 2, in the top 10: lost in the fusion (rank 2)")
    expect(lookup.get_by_label("Query", exact=True)).to_have_value(INODES)
    wait_idle(lookup)
    assert_no_exception(lookup, "lookup opened from a miss")
    fits(lookup, width, "Lookup opened from a miss")
    expect(page.get_by_text("Run tag").first).to_be_visible()  # the run is still on Evaluate
    lookup.close()


def settled_rows(page, app, db) -> dict[str, int]:
    """Open Invocations (it moves the rows the app spooled into DuckDB before reading), then count."""
    open_page(page, app, "invocations")
    assert_no_exception(page, "invocations")
    return table_rows(db)


def test_a_read_only_app_explains_and_records_nothing(page, tmp_path_factory, base_settings, sample_store):
    tmp = tmp_path_factory.mktemp("app-why-not-read-only")
    db = tmp / "invocations.duckdb"
    app = start_app(tmp, base_settings, collection="TestSample", env_extra={"LOOKUP_READ_ONLY": "1"})
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        start = settled_rows(page, app, db)
        open_connected(page, app, f"?q={quote_plus(INODES)}&why={quote_plus(INODE_ENTRY)}")
        expect(verdict(page)).to_contain_text("lost in the fusion (rank 2)")
        rerun(page, lambda: page.get_by_role("button", name="What would it take?").click())
        expect(page.get_by_text(re.compile(r"first: BM25F weight 1 → 0\.25 \(rank 1\)")).first).to_be_visible()
        link = page.get_by_role("link", name=re.compile("open Lookup with it$"))
        expect(link).to_have_count(1)
        assert "lw=0.25" in (link.get_attribute("href") or ""), link.get_attribute("href")
        type_query(page, "Disk full on the Postgres primary")  # typed: read-only records no lookup either
        pick(page, "data volume", "PostgreSQL data volume is almost full — databases/PostgresDiskFull")
        expect(alert(page, "Why not").first).to_contain_text("is the top result")
        assert_no_exception(page, "lookup, read-only")
        assert changed(start, settled_rows(page, app, db)) == {}
    finally:
        app.stop()
