"""Three findings of the user study, in a real chromium (Playwright): the Runs history leads with its metrics and a
missing rank reads "not found"; the Invocations charts count near-duplicate keywords once and set the calls routed to
no domain apart, and the store's size reads "1 row"; an app whose Weaviate port is held by another process's Weaviate
says so and never connects to it. The session's real embedded Weaviate, a real foreign one, real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from retrieval.core.record import utc_now_iso
from retrieval.lab.runs import RunStore
from retrieval.records.invocations import InvocationStore

from ..helpers.browser import alert, assert_no_exception, open_connected, open_page, rerun, start_app
from ..helpers.lab import saved_at
from ..helpers.records import make_record
from ..helpers.server_helper import foreign_weaviate

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FIRST_CALL = ("pods", "kubernetes")  # the store's one row when the app starts
# added later: the same keyword with spaces around it (as rows written before terms were trimmed), unrouted
LATER_CALLS = [("pods ", None), (" pods", None), ("pods\t", None), ("disk  full", "storage")]


def keyword_call(i: int, term: str, domain: str | None):
    details = {
        "layer": "L0",
        "fallback": False,
        "timings_ms": {"l0": 0.5, "total": 1.0},
        "l0": {"matched_keywords": [{"term": term, "field": "keyword", "weight": 1.0}]},
    }
    return make_record(
        i,
        id=f"kw-{i}",
        created_at=utc_now_iso(),
        input=f"query {i}",
        layer="L0",
        retrieval_details=details,
        domain=domain,
        session_tag="study",
        top_entry_id=None,
    )


def record(db: Path, calls: list[tuple[str, str | None]], start: int) -> None:
    store = InvocationStore(db)
    for i, (term, domain) in enumerate(calls, start):
        store.record(keyword_call(i, term, domain))
    store.flush()
    store.close()


@pytest.fixture(scope="module")
def study_app(tmp_path_factory, base_settings, sample_store):
    """The app on the sample corpus, its DuckDB file holding two saved runs (case c1 not found in the second) and one
    call."""
    tmp = tmp_path_factory.mktemp("app-study")
    db = tmp / "invocations.duckdb"
    runs = RunStore(db)
    saved_at(runs, 1, {"c1": 1, "c2": 2}, base_settings)
    saved_at(runs, 2, {"c1": None, "c2": 1}, base_settings.with_(vector_weight=3.0))
    record(db, [FIRST_CALL], 0)
    app = start_app(tmp, base_settings, collection="TestSample")
    yield app, db
    app.stop()


# --- Runs: the metrics lead the history; a missing rank reads "not found" ------------------------------------------
def drawn_columns(grid) -> list[str]:
    """The header names of the columns a data grid draws in its visible width, whole or in part (it draws on a canvas;
    its accessible table lists the columns in view, and none before the grid is scrolled into the viewport)."""
    grid.scroll_into_view_if_needed()
    grid.locator('[role="columnheader"]').first.wait_for(state="attached")
    return [t.strip() for t in grid.locator('[role="columnheader"]').all_text_contents()]


# at 390 the history's first screen holds run_id, time, set and the start of mrr@10; hit@1 is a sideways scroll of the
# grid away (the page itself does not scroll sideways)
@pytest.mark.parametrize("width, height, in_view", [(1280, 800, ("mrr@10", "hit@1")), (390, 844, ("mrr@10",))])
def test_runs_history_shows_its_metrics_on_screen_and_a_missing_rank_reads_not_found(page, study_app, width, height, in_view):
    app, _ = study_app
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, app, "runs")
    assert_no_exception(page, "runs")
    grids = page.locator('[data-testid="stDataFrame"]')
    history = grids.first
    drawn = drawn_columns(history)
    assert drawn[:4] == ["run_id", "time (UTC)", "set", "mrr@10"], f"the history's first columns at {width}: {drawn}"
    missing = [name for name in in_view if name not in drawn]
    assert not missing, f"{missing} not drawn in the history's visible width at {width} px (drawn: {drawn})"
    box = history.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, f"the history sticks out at {width}: {box}"
    page_width = page.evaluate("() => document.documentElement.scrollWidth")
    assert page_width <= width, f"the page scrolls sideways at {width}: {page_width} px wide"
    # the cases of the two latest runs (compared by default): c1 was not in run B's top 10
    cases = grids.nth(2)
    expect(cases).to_be_attached()
    assert "rank B" in drawn_columns(cases)
    # a missing value's cell is empty in the accessible table while the canvas draws a grey "None" in it
    cells = [c.strip() for c in cases.locator('[role="gridcell"]').all_text_contents()]
    assert "not found" in cells and not {"None", ""} & set(cells), f"the cases table's cells at {width}: {cells}"
    captions = page.locator('[data-testid="stMain"] [data-testid="stCaptionContainer"]').all_inner_texts()
    shared = [c for c in captions if c.startswith("Same in every run:")]
    assert shared and "lexical_weight=1" in shared[0], f"no caption of the settings every run shares: {captions}"


# --- Invocations: one bar per keyword, unrouted calls beside the chart, "1 row" ----------------------------------
def chart_labels(page, title: str) -> list[str]:
    chart = page.locator(".js-plotly-plot").filter(has_text=title)
    expect(chart).to_have_count(1)
    chart.scroll_into_view_if_needed()
    return [t.strip() for t in chart.locator(".ytick text").all_text_contents()]


def test_invocations_count_a_keyword_once_and_set_unrouted_calls_apart(page, study_app):
    app, db = study_app
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, app, "invocations")
    sidebar = page.get_by_test_id("stSidebarUserContent")
    store_line = sidebar.locator('[data-testid="stCaptionContainer"]').filter(has_text="Invocation store:")
    expect(store_line).to_have_count(1)
    assert store_line.inner_text().strip().endswith(", 1 row"), store_line.inner_text()
    record(db, LATER_CALLS, len([FIRST_CALL]))
    open_page(page, app, "invocations")
    assert_no_exception(page, "invocations")
    expect(store_line).to_contain_text(", 5 rows")
    keywords = chart_labels(page, "Top L0 keywords")
    assert keywords.count("pods") == 1 and "disk full" in keywords, f"Top L0 keywords: {keywords}"
    domains = chart_labels(page, "Top domains")
    assert "(none)" not in domains and sorted(domains) == ["kubernetes", "storage"], f"Top domains: {domains}"
    captions = page.locator('[data-testid="stMain"] [data-testid="stCaptionContainer"]').all_inner_texts()
    assert [c for c in captions if c.startswith("Not charted: 3 calls routed to no domain")], captions


# --- a foreign Weaviate on the app's port: named, never connected to, never written into ---------------------------
def two_entry_corpus(root: Path) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "DnsDown.md").write_text("---\ntitle: DNS resolution fails\n---\nCheck the CoreDNS pods.\n")
    (root / "net" / "PacketLoss.md").write_text("---\ntitle: Packet loss between zones\n---\nLoss over 2 percent.\n")
    return root


def test_a_port_held_by_another_weaviate_is_named_and_never_written_into(page, tmp_path, base_settings):
    with foreign_weaviate(tmp_path / "someone-else") as foreign:
        env = {
            "LOOKUP_WEAVIATE_PORT": str(foreign.port),
            "LOOKUP_WEAVIATE_GRPC_PORT": str(foreign.grpc_port),
            "LOOKUP_L1_TIMEOUT_S": "60",  # a cold start of the app's own server on a busy machine
        }
        app = start_app(
            tmp_path,
            base_settings,
            collection="TestForeignPort",
            corpus=two_entry_corpus(tmp_path / "kb"),
            weaviate_env=env,
        )
        try:
            page.set_viewport_size({"width": 1280, "height": 800})
            open_connected(page, app, "corpus")
            assert_no_exception(page, "corpus")
            sidebar = page.get_by_test_id("stSidebarUserContent")
            whose = f"127.0.0.1:{foreign.port} is held by another Weaviate"
            warnings = sidebar.locator('[data-testid="stAlert"]').all_inner_texts()
            assert [w for w in warnings if whose in w and "this app uses port" in w], f"sidebar warnings: {warnings}"
            connected = sidebar.locator('[data-testid="stMarkdownContainer"]').filter(has_text="L1 connected")
            expect(connected).to_have_count(1)
            assert f"127.0.0.1:{foreign.port}" not in connected.inner_text(), connected.inner_text()
            assert f"127.0.0.1:{foreign.port}" not in sidebar.inner_text().replace(whose, ""), sidebar.inner_text()
            rerun(page, lambda: page.get_by_role("button", name="Ingest", exact=True).click())
            assert_no_exception(page, "corpus after Ingest")
            expect(alert(page, "Indexed").filter(has_text="TestForeignPort")).to_be_visible()
            assert foreign.collections() == {"Orphan"}, "the app wrote into the other process's Weaviate"
        finally:
            app.stop()
