"""The app in a real browser: `streamlit run app.py` headless on a free port, driven through Debian's
chromium with Playwright, against the session's real embedded Weaviate (conftest). Screenshots of every
page go to test-artifacts/screenshots/ (gitignored)."""

from __future__ import annotations

import re
from urllib.parse import quote_plus

import pytest
import yaml
from playwright.sync_api import expect

from retrieval.bench.script_runs import script_run
from retrieval.config import REPO_ROOT

from ..conftest import RUNBOOKS, RUNBOOKS_EVAL, needs_shared
from ..helpers.browser import (  # noqa: F401
    CHROMIUM,
    CHROMIUM_ARGS,
    SHOTS,
    UNEXPECTED,
    WAIT_MS,
    RunningApp,
    alert,
    assert_no_exception,
    column,
    enter_text,
    header,
    metric_values,
    open_candidates,
    open_connected,
    open_page,
    rerun,
    shot,
    start_app,
    table_rows,
    type_query,
    wait_idle,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGES = {
    "lookup": "",
    "filter-comparison": "filter_comparison",
    "evaluate": "evaluate",
    "invocations": "invocations",
    "corpus": "corpus",
}
SAMPLE_VIEWS = {
    "lookup": "?q=" + quote_plus("Vault is sealed"),
    "filter-comparison": "filter_comparison?cq=" + quote_plus("Pod keeps restarting"),
}
RUNBOOKS_VIEWS = {
    "lookup": "?q=" + quote_plus("Pod is crash looping."),
    "filter-comparison": "filter_comparison?cq=" + quote_plus("Pod is crash looping."),
}
TITLES = {
    "lookup": "Lookup",
    "filter-comparison": "Filter comparison",
    "evaluate": "Evaluate",
    "invocations": "Invocations",
    "corpus": "Corpus",
}
# script_run (it counts Streamlit's script runs in the page) is the bench's (retrieval.bench.script_runs).


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory, base_settings, sample_store):
    app = start_app(tmp_path_factory.mktemp("app-sample"), base_settings, collection="TestSample")
    yield app
    app.stop()


@pytest.fixture(scope="module")
def runbooks_app(tmp_path_factory, base_settings, request):
    needs_shared()
    request.getfixturevalue("runbooks_store")  # its own collection, TestRunbooks, ingested first
    app = start_app(tmp_path_factory.mktemp("app-runbooks"), base_settings, collection="TestRunbooks", corpus=RUNBOOKS)
    yield app
    app.stop()


# --- the sample corpus ---------------------------------------------------------------------------------------
def test_lookup_in_the_browser(page, sample_app):
    open_connected(page, sample_app)
    type_query(page, "PostgreSQL replication lag on the standby")
    assert_no_exception(page, "lookup")
    for panel in ("Matched titles", "Domains", "Entities"):
        expect(page.get_by_text(panel, exact=True)).to_be_visible()
    expect(page.locator("mark").nth(2)).to_be_attached()  # 3+ matched words, in the query and the matched titles
    expect(alert(page, "one domain: databases → L1 filtered on category = databases")).to_be_visible()
    assert column(page, 0, "entry_id")[0] == "databases/PostgresReplicationLag"  # the results come first
    open_candidates(page)
    assert set(column(page, 1, "domain")) == {"databases"}  # L1 candidates, filtered
    page.get_by_text("Where the time went (stage timings)").click()  # on demand: the answer comes first
    expect(page.locator(".js-plotly-plot").first).to_be_visible()  # the latency bar (drawn after the run)
    expect(page).to_have_url(re.compile(r"q=PostgreSQL(\+|%20)replication(\+|%20)lag"))
    # the URL reopens the view in a fresh tab
    url = page.url
    fresh = page.context.new_page()
    open_page(fresh, sample_app, url.split("/", 3)[3])
    expect(fresh.get_by_label("Query", exact=True)).to_have_value("PostgreSQL replication lag on the standby")
    assert column(fresh, 0, "entry_id")[0] == "databases/PostgresReplicationLag"
    fresh.close()


def test_every_page_in_the_browser(page, sample_app):
    for name, path in PAGES.items():
        open_page(page, sample_app, SAMPLE_VIEWS.get(name, path))
        assert_no_exception(page, name)
        expect(page.locator("h1").filter(has_text=TITLES[name])).to_have_count(1)
        expect(page.get_by_test_id("stSidebarUserContent").get_by_text("Status", exact=True)).to_be_visible()  # the frame
        shot(page, f"sample-{name}")
    # the page icon is the app's own (an emoji drawn by the page), not fetched from a font host
    icons = page.evaluate("() => [...document.querySelectorAll('link[rel*=icon]')].map(l => l.href)")
    assert icons and not [h for h in icons if "gstatic" in h or "googleapis" in h], icons
    # writable (loopback, LOOKUP_READ_ONLY unset): the Corpus page offers Ingest
    expect(page.get_by_role("button", name="Ingest", exact=True)).to_be_visible()


def test_sql_console_and_row_details_in_the_browser(page, sample_app):
    open_page(page, sample_app)
    type_query(page, "disk full")  # Enter: an explicit run, recorded (opening a ?q= URL records nothing)
    open_page(page, sample_app, "invocations")
    expect(page.locator(".js-plotly-plot").nth(3)).to_be_visible()  # 4+ charts
    sql = page.get_by_label("SQL", exact=True)
    enter_text(sql, "DROP TABLE tool_invocation", key="Control+Enter")
    rerun(page, lambda: page.get_by_role("button", name="Run query").click())
    refused = alert(page, "Refused")
    expect(refused).to_have_count(1)
    expect(refused).to_contain_text("only SELECT or EXPLAIN")
    assert_no_exception(page, "invocations")
    # select the first call in the table: its retrieval_details open. The grid draws on a canvas after the
    # run; its accessible table (one row per drawn row) says when the first data row is there.
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    expect(grid.locator('[role="row"]').nth(1)).to_be_attached()
    box = grid.bounding_box()
    rerun(page, lambda: page.mouse.click(box["x"] + 18, box["y"] + 35 + 17))
    expect(page.get_by_text("retrieval_details of").first).to_be_visible()
    # the selected call: its results and relevance, and a link that reopens it in Lookup
    expect(page.get_by_text("Relevance:").first).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Open in Lookup"))).to_be_visible()
    shot(page, "sample-invocations-details")


def test_read_only_corpus_page_in_the_browser(page, tmp_path_factory, base_settings, sample_store):
    """LOOKUP_READ_ONLY=true: the Corpus page offers no Ingest, Re-index or Reload, and the sidebar says why."""
    app = start_app(
        tmp_path_factory.mktemp("app-read-only"), base_settings, collection="TestSample", env_extra={"LOOKUP_READ_ONLY": "true"}
    )
    try:
        open_page(page, app, "corpus")
        assert_no_exception(page, "read-only corpus")
        expect(alert(page, "Ingest, Re-index and Reload are off")).to_be_visible()
        for name in ("Ingest", "Re-index", "Reload corpus from disk"):
            expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        expect(page.get_by_test_id("stSidebarUserContent").get_by_text("Read-only", exact=True)).to_be_visible()
        expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text("48")  # the page itself is there
        shot(page, "sample-corpus-read-only")
    finally:
        app.stop()


# --- the runbooks corpus -------------------------------------------------------------------------------------
def test_a_deep_link_as_the_first_request_gets_the_frame(page, runbooks_app):
    """The first request this server sees is /corpus: Streamlit would run the page file alone (its pages/
    fallback until the first st.navigation call); the app reruns it through app.py."""
    open_page(page, runbooks_app, "corpus")
    assert_no_exception(page, "runbooks corpus (deep link)")
    sidebar = page.get_by_test_id("stSidebarUserContent")
    expect(sidebar.get_by_text("Status", exact=True)).to_be_visible()
    expect(sidebar.get_by_text("L1 connected")).to_be_visible()
    expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text("108")


def test_runbooks_crash_looping_in_the_browser(page, runbooks_app):
    open_connected(page, runbooks_app)  # the routing's L1 filter and the candidates need L1
    type_query(page, "Pod is crash looping.")
    assert_no_exception(page, "runbooks lookup")
    expect(alert(page, "Routing: one domain: kubernetes → L1 filtered on category = kubernetes")).to_be_visible()
    assert column(page, 0, "entry_id")[0] == "kubernetes/KubePodCrashLooping"  # the results come first
    open_candidates(page)
    expect(
        page.locator('[data-testid="stCaptionContainer"]').filter(has_text="filtered on category = kubernetes, status ok")
    ).to_be_visible()
    candidates = column(page, 1, "domain")
    assert candidates and set(candidates) == {"kubernetes"}


def test_runbooks_filter_comparison_on_the_eval_set(page, runbooks_app):
    label = f"shared/eval_sets/{RUNBOOKS_EVAL.name}"
    open_page(page, runbooks_app, "filter_comparison?eval=" + quote_plus(label))
    expect(page.get_by_text("written for the corpus")).to_have_count(0)  # the eval set fits the loaded corpus
    rerun(page, lambda: page.get_by_role("button", name="Compare on").click())
    expect(page.locator('[data-testid="stMetricLabel"]').filter(has_text="Helped")).to_be_visible()
    assert_no_exception(page, "runbooks filter comparison")
    m = metric_values(page)
    counts = {k: int(m[k]) for k in ("Helped", "Hurt", "No change", "Not applied")}
    assert sum(counts.values()) == _answerable_in(RUNBOOKS_EVAL)
    shot(page, "runbooks-filter-comparison-eval-set")


def test_every_runbooks_page_in_the_browser(page, runbooks_app):
    for name, path in PAGES.items():
        open_page(page, runbooks_app, RUNBOOKS_VIEWS.get(name, path))
        assert_no_exception(page, f"runbooks {name}")
        expect(page.locator("h1").filter(has_text=TITLES[name])).to_have_count(1)
        shot(page, f"runbooks-{name}")


def test_runbooks_evaluate_results_fit_the_page(page, runbooks_app):
    """Evaluate on the runbooks summaries: the metrics table has three decimals, blanks and marks with a
    legend, and fits the page without a horizontal scroll; the screenshot is kept for review."""
    label = f"shared/eval_sets/{RUNBOOKS_EVAL.name}"
    open_page(page, runbooks_app, "evaluate?es=" + quote_plus(label))
    expect(page.get_by_text("does not fit")).to_have_count(0)
    cases = len(yaml.safe_load(RUNBOOKS_EVAL.read_text(encoding="utf-8"))["cases"])  # the file's own count
    run = page.get_by_role("button", name=re.compile(rf"^Run {cases} cases"))
    script_run(page, run.click, timeout_ms=900_000)  # every configuration on every case
    assert_no_exception(page, "runbooks evaluate")
    table = page.locator('[data-testid="stTable"]').first
    expect(table).to_be_visible()
    cells = [c.strip() for c in table.locator("tbody td").all_inner_texts()]
    assert cells and all(re.fullmatch(r"(\d\.\d{3}( [▲▼])?)?", c) for c in cells), cells
    fits = table.evaluate("el => el.scrollWidth <= el.clientWidth + 1 && el.getBoundingClientRect().right <= window.innerWidth")
    assert fits, "the metrics table is wider than the page"
    expect(page.get_by_text("significantly higher / lower than lookup").first).to_be_visible()
    expect(page.get_by_text(re.compile(r"Holm-corrected over \d+ tests")).first).to_be_visible()
    # the settings of the run, as name=value chips, under its tag
    strip = page.locator(".st-key-eval_run_settings")
    expect(strip).to_be_visible()
    chips = [c.strip() for c in strip.locator("code").all_inner_texts()]
    assert "search_mode=fusion" in chips and any(c.startswith("embedding_model=") for c in chips), chips
    assert any(c.startswith("support_threshold=") for c in chips) and any(c.startswith("top_k=") for c in chips), chips
    shot(page, "runbooks-evaluate-results")


def _answerable_in(path):
    """Cases of an eval set file that expect an entry, read from the file (the shared sets change between turns)."""
    return sum(bool(c.get("expected")) for c in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"])


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_answer_comes_first_on_a_desktop_and_a_phone(page, sample_app, width, height):
    """The top result and the verdict sit under the query, in the first screen, without scrolling (they used to be
    about 2,000 px down at 1280 wide and 3,500 px on a phone, under three candidate tables)."""
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app)  # the answer as L1 gives it, not L0's while Weaviate starts
    type_query(page, "PostgreSQL replication lag on the standby")
    page.evaluate("window.scrollTo(0, 0)")
    verdict = alert(page, "Relevance:")
    expect(verdict).to_be_visible()
    top = page.get_by_role("heading", name="PostgreSQL replication lag is high").first
    expect(top).to_be_visible()
    for element, what in ((top, "the top result"), (verdict, "the verdict")):
        box = element.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, f"{what} below the first screen at {width}: {box}"
    shot(page, f"sample-lookup-first-screen-{width}")


# --- what the users tripped on: model named in captions, tables that fit ------------------------------------
def test_the_filter_comparison_names_the_model_and_shows_every_column_at_1280(page, sample_app, base_settings):
    """Its caption names the model of the settings (it read "MiniLM" whatever the model), and the two tables side by
    side show every column, distance and score included, without a horizontal scroll at 1280 wide."""
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, sample_app, "filter_comparison?cq=" + quote_plus("Pod keeps restarting"))
    assert_no_exception(page, "filter comparison")
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text(base_settings.embedding_model).first).to_be_visible()
    expect(main.get_by_text("MiniLM")).to_have_count(0)
    grids = page.locator('[data-testid="stDataFrame"]')
    expect(grids).to_have_count(2)
    for i in range(2):
        scroller = grids.nth(i).locator(".dvn-scroller").first
        scroller.wait_for()
        fits = scroller.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
        assert fits, f"table {i + 1} of 2 scrolls sideways at 1280 px: a column is cut off"
    shot(page, "sample-filter-comparison-1280")


def test_no_change_draws_no_arrow_on_the_eval_set_comparison(page, sample_app):
    """The filtered MRR's change: an arrow only for a change that shows in three decimals (a "+0.000" drew a green
    up arrow)."""
    open_page(page, sample_app, "filter_comparison")  # the largest set that fits the corpus is picked
    button = page.get_by_role("button", name=re.compile(r"^Compare on \d+ cases"))
    expect(button).to_be_visible()
    rerun(page, lambda: button.click())
    assert_no_exception(page, "filter comparison on an eval set")
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="MRR filtered")
    expect(metric).to_have_count(1)
    values = metric_values(page)
    change = float(values["MRR filtered"].split()[0]) - float(values["MRR unfiltered"])  # as the page rounds them
    deltas = metric.locator('[data-testid="stMetricDelta"]')
    if deltas.count():  # an arrow only for a change that shows in three decimals
        shown = deltas.inner_text().strip()
        assert shown not in ("+0.000", "-0.000"), "no change drawn with an arrow"
        assert abs(float(shown) - change) <= 0.0015, (shown, values)
    else:
        assert abs(change) <= 0.001, f"a change of {change:+.3f} without its arrow"


def test_invocations_download_labels_and_corpus_buttons_read_whole(page, sample_app):
    """At 1280 wide the export buttons read "Download CSV" and "Download Parquet" in full (it was "Download Par…"),
    and with nothing to index the Corpus page's Ingest is not the primary button."""
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, sample_app)
    type_query(page, "Vault is sealed")  # one recorded call, so that the page has rows to export
    open_page(page, sample_app, "invocations")
    assert_no_exception(page, "invocations")
    for name in ("Download CSV", "Download Parquet"):
        button = page.get_by_role("button", name=name)
        expect(button).to_be_visible()
        whole = button.evaluate("el => [el, ...el.querySelectorAll('*')].every(n => n.scrollWidth <= n.clientWidth + 1)")
        assert whole, f"{name} is cut off"
    open_page(page, sample_app, "corpus")  # the sample corpus is indexed already: nothing for Ingest to do
    assert_no_exception(page, "corpus")
    ingest = page.get_by_role("button", name="Ingest", exact=True)
    expect(ingest).to_be_visible()
    assert ingest.get_attribute("data-testid") == "stBaseButton-secondary", "Ingest is the primary button with nothing to do"


def test_the_verdict_why_here_and_highlights_read_right_in_the_browser(page, sample_app):
    """One lookup: the verdict's sentence starts with a capital after "(semantic support: …)." and gives the tile's
    estimate in the same words; "Why here" says what a list that missed a result counted; only the words L0 matched
    are highlighted, never a whole name around them; the Invocations chart then leaves single title words out."""
    open_connected(page, sample_app)  # the verdict's estimate needs L1
    type_query(page, "PostgreSQL replication lag on the standby")
    verdict = alert(page, "Relevance:").inner_text()
    after = verdict.split("). ", 1)[1]
    assert after[0].isupper(), verdict
    tile = metric_values(page)["Support estimate"].splitlines()[0]
    assert re.fullmatch(r"(> 99%|< 1%|\d{1,2}%)", tile) and tile in verdict, (tile, verdict)
    why = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="Why here").inner_text()
    lines = [ln for ln in why.splitlines() if ln.startswith("#")]
    assert lines and all("(each scaled to this query's best)" in ln or "only: ranked by its L0 score" in ln for ln in lines)
    missing = [ln for ln in lines if "not in the" in ln]
    assert all(re.search(r"not in the (vector|BM25F) list(, which was cut at its limit)?: counted", ln) for ln in missing)
    marks = [m.strip().lower() for m in page.locator("mark").all_inner_texts()]
    assert marks and all(m in "postgresql replication lag on the standby" for m in marks), marks
    open_page(page, sample_app, "invocations")
    assert_no_exception(page, "invocations")
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Top L0 keywords")
    expect(chart.locator(".ytick text").first).to_be_visible()
    assert "lag" not in chart.locator(".ytick text").all_inner_texts()  # one word of a title: left out at first
    rerun(page, lambda: page.get_by_text("Single title words too").click())
    expect(chart.locator(".ytick text").filter(has_text=re.compile(r"^lag$"))).to_have_count(1)


# --- the support estimate: its calibration on Evaluate, its abstention on Lookup --------------------------------
@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_evaluate_draws_the_reliability_of_the_support_estimate(page, sample_app, width, height):
    """A run on the sample alerts draws the support estimate's reliability diagram (a point per bin of the estimate,
    its count beside it, the diagonal of a calibrated estimate) under the predicted and measured hit@1 and the ECE."""
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app, "evaluate?es=" + quote_plus("eval_sets/sample-ops-alerts.yaml"))
    cases = len(yaml.safe_load((REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml").read_text(encoding="utf-8"))["cases"])
    script_run(page, page.get_by_role("button", name=re.compile(rf"^Run {cases} cases")).click, timeout_ms=600_000)
    assert_no_exception(page, "evaluate")
    words = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text="Calibration of the support estimate")
    expect(words).to_be_visible()
    text = words.inner_text()
    assert re.search(r"predicted hit@1 \(the mean estimate\) \d\.\d{3} against measured \d\.\d{3}", text), text
    assert re.search(r"expected calibration error \d\.\d{3}", text), text
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Reliability of the support estimate")
    chart.scroll_into_view_if_needed()
    expect(chart).to_be_visible()
    counts = [int(t) for t in chart.locator(".scatterlayer .textpoint text").all_text_contents()]
    assert sum(counts) == cases, counts  # every case in a bin, each bin's count written beside it
    box = chart.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box  # it fits the page
    shot(page, f"sample-evaluate-reliability-{width}")


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_an_unanswerable_query_reads_as_no_supported_answer_first(page, sample_app, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, sample_app)
    type_query(page, "how do I bake sourdough bread with rye flour")
    page.evaluate("window.scrollTo(0, 0)")
    head = page.get_by_role("heading", name="No supported answer in the knowledge base").first
    expect(head).to_be_visible()
    expect(page.get_by_text("The nearest entry:").first).to_be_visible()
    box = head.bounding_box()
    assert box is not None and box["y"] + box["height"] <= height, box  # in the first screen
    shot(page, f"sample-lookup-no-supported-answer-{width}")
