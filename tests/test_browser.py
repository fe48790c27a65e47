"""The app in a real browser: `streamlit run app.py` headless on a free port, driven through Debian's
chromium with Playwright, against the session's real embedded Weaviate (conftest). Screenshots of every
page go to test-artifacts/screenshots/ (gitignored)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from retrieval.config import REPO_ROOT

from .conftest import RUNBOOKS, RUNBOOKS_EVAL, free_port, needs_shared

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
SHOTS = REPO_ROOT / "test-artifacts" / "screenshots"
PAGES = {"lookup": "", "filter-comparison": "filter_comparison", "evaluate": "evaluate",
         "invocations": "invocations", "corpus": "corpus"}
SAMPLE_VIEWS = {"lookup": "?q=" + quote_plus("Vault is sealed"),
                "filter-comparison": "filter_comparison?cq=" + quote_plus("Pod keeps restarting")}
RUNBOOKS_VIEWS = {"lookup": "?q=" + quote_plus("Pod is crash looping."),
                  "filter-comparison": "filter_comparison?cq=" + quote_plus("Pod is crash looping.")}
TITLES = {"lookup": "Lookup", "filter-comparison": "Filter comparison", "evaluate": "Evaluate",
          "invocations": "Invocations", "corpus": "Corpus"}
UNEXPECTED = "Something went wrong on this page"
SNAPSHOT = """() => { const app = document.querySelector('[data-testid="stApp"]');
                      return [app && app.getAttribute('data-test-script-state'), document.body.innerHTML.length]; }"""


@dataclass
class RunningApp:
    url: str
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def start_app(tmp: Path, base_settings, *, collection: str, corpus: Path | None = None,
              weaviate_env: dict[str, str] | None = None) -> RunningApp:
    """`streamlit run app.py` on a free port. Weaviate: the session's server by URL, or what `weaviate_env`
    says (e.g. an embedded server's ports and data directory)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_")}
    env.update({
        "LOOKUP_CONFIG": str(tmp / "no-lookup.yaml"),
        "LOOKUP_COLLECTION": collection,
        "LOOKUP_DATA_DIR": str(tmp / "data"),
        "LOOKUP_DB_PATH": str(tmp / "invocations.duckdb"),
    })
    env.update(weaviate_env if weaviate_env is not None else {
        "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
        "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
    })
    if corpus is not None:
        env["LOOKUP_CORPUS_DIR"] = str(corpus)
    log = tmp / "streamlit.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    app = RunningApp(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"streamlit exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{app.url}/_stcore/health", timeout=2) as resp:
                if resp.read().decode().strip() == "ok":
                    return app
        except OSError:
            pass
        time.sleep(0.3)
    app.stop()
    raise AssertionError(f"streamlit did not answer /_stcore/health in 60 s:\n{log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: run scripts/setup.sh --browser (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    yield tab
    context.close()


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


# --- helpers -------------------------------------------------------------------------------------------------
def settle(page, quiet_s: float = 0.6, timeout_s: float = 90.0) -> None:
    """Wait until the script run has finished AND the page stopped changing: the script state turns
    'notRunning' before lazily loaded elements (tables, charts) are drawn."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_timeout(200)
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        state, size = page.evaluate(SNAPSHOT)
        now = time.monotonic()
        if state != "notRunning" or size != last:
            last, since = size, now
        elif now - since >= quiet_s:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the page did not settle in {timeout_s} s")


def open_page(page, app: RunningApp, path: str = "") -> None:
    """Load a URL and wait for its first script run to finish (every page starts with a title)."""
    page.goto(f"{app.url}/{path}")
    page.locator('[data-testid="stMain"] h1').first.wait_for()
    settle(page)


def assert_no_exception(page, where: str) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception shown on {where}"
    assert page.get_by_text(UNEXPECTED).count() == 0, f"unexpected error on {where}"


def shot(page, name: str) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its main block, so the viewport is made as
    tall as the content for the shot."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], min(int(height) + 40, 8000))})
    settle(page)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    page.set_viewport_size(size)


def table_rows(page, index: int) -> list[list[str]]:
    """The body rows of the index-th st.table on the page, as cell texts (first cell: the rank)."""
    table = page.locator('[data-testid="stTable"] table').nth(index)
    return [[c.strip() for c in row.locator("th, td").all_inner_texts()] for row in table.locator("tbody tr").all()]


def header(page, index: int) -> list[str]:
    table = page.locator('[data-testid="stTable"] table').nth(index)
    return [c.strip() for c in table.locator("thead th").all_inner_texts()]


def column(page, index: int, name: str) -> list[str]:
    """One column of the index-th st.table; waits for the table to be drawn with its header."""
    page.locator('[data-testid="stTable"]').nth(index).locator("thead th").filter(has_text=name).first.wait_for()
    cols = header(page, index)
    return [row[cols.index(name)] for row in table_rows(page, index)]


def type_query(page, text: str) -> None:
    box = page.get_by_label("Query", exact=True)
    box.fill(text)
    box.press("Enter")
    page.get_by_text("L1 candidates", exact=True).wait_for()
    settle(page)


def alert(page, text: str):
    """The one st.info/warning/error/success box that contains `text`."""
    return page.locator('[data-testid="stAlert"]').filter(has_text=text)


def metric_values(page) -> dict[str, str]:
    out = {}
    for m in page.locator('[data-testid="stMetric"]').all():
        label = m.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        out[label] = m.locator('[data-testid="stMetricValue"]').inner_text().strip()
    return out


# --- the sample corpus ---------------------------------------------------------------------------------------
def test_lookup_in_the_browser(page, sample_app):
    open_page(page, sample_app)
    assert page.get_by_text("L1 connected").is_visible()
    type_query(page, "PostgreSQL replication lag on the standby")
    assert_no_exception(page, "lookup")
    for panel in ("Matched titles", "Domains", "Entities"):
        assert page.get_by_text(panel, exact=True).is_visible()
    assert page.locator("mark").count() >= 3  # matched words, in the query and the matched titles
    assert alert(page, "one domain: databases → L1 filtered on category = databases").is_visible()
    assert set(column(page, 0, "domain")) == {"databases"}  # L1 candidates, filtered
    assert column(page, 1, "entry_id")[0] == "databases/PostgresReplicationLag"  # final results
    assert page.locator(".js-plotly-plot").count() >= 1  # the latency bar
    assert "q=PostgreSQL+replication+lag" in page.url or "q=PostgreSQL%20replication%20lag" in page.url
    # the URL reopens the view in a fresh tab
    url = page.url
    fresh = page.context.new_page()
    open_page(fresh, sample_app, url.split("/", 3)[3])
    assert fresh.get_by_label("Query", exact=True).input_value() == "PostgreSQL replication lag on the standby"
    assert column(fresh, 1, "entry_id")[0] == "databases/PostgresReplicationLag"
    fresh.close()


def test_every_page_in_the_browser(page, sample_app):
    for name, path in PAGES.items():
        open_page(page, sample_app, SAMPLE_VIEWS.get(name, path))
        assert_no_exception(page, name)
        assert page.locator("h1").filter(has_text=TITLES[name]).count() == 1
        assert page.get_by_test_id("stSidebarUserContent").get_by_text("Status", exact=True).is_visible()  # the frame
        shot(page, f"sample-{name}")


def test_sql_console_and_row_details_in_the_browser(page, sample_app):
    open_page(page, sample_app, "?q=" + quote_plus("disk full"))
    open_page(page, sample_app, "invocations")
    assert page.locator(".js-plotly-plot").count() >= 4
    sql = page.get_by_label("SQL", exact=True)
    sql.fill("DROP TABLE tool_invocation")
    sql.press("Control+Enter")
    settle(page)
    page.get_by_role("button", name="Run query").click()
    settle(page)
    refused = alert(page, "Refused")
    assert refused.count() == 1 and "only SELECT or EXPLAIN" in refused.inner_text()
    assert_no_exception(page, "invocations")
    # select the first call in the table: its retrieval_details open
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)
    settle(page)
    assert page.get_by_text("retrieval_details of").first.is_visible()
    shot(page, "sample-invocations-details")


# --- the runbooks corpus -------------------------------------------------------------------------------------
def test_a_deep_link_as_the_first_request_gets_the_frame(page, runbooks_app):
    """The first request this server sees is /corpus: Streamlit would run the page file alone (its pages/
    fallback until the first st.navigation call); the app reruns it through app.py."""
    open_page(page, runbooks_app, "corpus")
    assert_no_exception(page, "runbooks corpus (deep link)")
    sidebar = page.get_by_test_id("stSidebarUserContent")
    assert sidebar.get_by_text("Status", exact=True).is_visible() and sidebar.get_by_text("L1 connected").is_visible()
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text().strip() == "108"


def test_runbooks_crash_looping_in_the_browser(page, runbooks_app):
    open_page(page, runbooks_app)
    type_query(page, "Pod is crash looping.")
    assert_no_exception(page, "runbooks lookup")
    assert alert(page, "Routing: one domain: kubernetes → L1 filtered on category = kubernetes").is_visible()
    assert page.locator('[data-testid="stCaptionContainer"]').filter(
        has_text="filtered on category = kubernetes, status ok").is_visible()
    candidates = column(page, 0, "domain")
    assert candidates and set(candidates) == {"kubernetes"}
    assert column(page, 1, "entry_id")[0] == "kubernetes/KubePodCrashLooping"


def test_runbooks_filter_comparison_on_the_eval_set(page, runbooks_app):
    label = f"shared/eval_sets/{RUNBOOKS_EVAL.name}"
    open_page(page, runbooks_app, "filter_comparison?eval=" + quote_plus(label))
    assert page.get_by_text("written for the corpus").count() == 0  # the eval set fits the loaded corpus
    page.get_by_role("button", name="Compare on").click()
    page.locator('[data-testid="stMetricLabel"]').filter(has_text="Helped").wait_for()
    settle(page)
    assert_no_exception(page, "runbooks filter comparison")
    m = metric_values(page)
    counts = {k: int(m[k]) for k in ("Helped", "Hurt", "No change", "Not applied")}
    assert sum(counts.values()) == 104
    shot(page, "runbooks-filter-comparison-eval-set")


def test_every_runbooks_page_in_the_browser(page, runbooks_app):
    for name, path in PAGES.items():
        open_page(page, runbooks_app, RUNBOOKS_VIEWS.get(name, path))
        assert_no_exception(page, f"runbooks {name}")
        assert page.locator("h1").filter(has_text=TITLES[name]).count() == 1
        shot(page, f"runbooks-{name}")
