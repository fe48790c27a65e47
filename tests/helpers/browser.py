"""The app in a real chromium (Playwright): starting `streamlit run app.py`, the browser and page fixtures, and reading
and driving pages."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from retrieval.bench.script_runs import IDLE, script_run, submit_text, watch_runs
from retrieval.config import REPO_ROOT, child_environment

from ..conftest import CHROMIUM, free_port, needs_chromium

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


SHOTS = REPO_ROOT / "test-artifacts" / "screenshots"


UNEXPECTED = "Something went wrong on this page"


WAIT_MS = 180_000  # the upper bound of every wait on state below; none of them waits for time to pass


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


def start_app(
    tmp: Path,
    base_settings,
    *,
    collection: str,
    corpus: Path | None = None,
    weaviate_env: dict[str, str] | None = None,
    env_extra: dict[str, str] | None = None,
) -> RunningApp:
    """`streamlit run app.py` on a free port. Weaviate: the session's server by URL, or what `weaviate_env`
    says (e.g. an embedded server's ports and data directory); `env_extra` goes into the environment last."""
    port = free_port()
    env = child_environment()
    env.update(
        {
            "LOOKUP_CONFIG": str(tmp / "no-lookup.yaml"),
            "LOOKUP_COLLECTION": collection,
            "LOOKUP_DATA_DIR": str(tmp / "data"),
            "LOOKUP_DB_PATH": str(tmp / "invocations.duckdb"),
        }
    )
    env.update(
        weaviate_env
        if weaviate_env is not None
        else {
            "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
            "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
        }
    )
    if corpus is not None:
        env["LOOKUP_CORPUS_DIR"] = str(corpus)
    # The frame waits for Weaviate as long as a page takes to load, so a test reads one settled page; the
    # background start itself is tested with LOOKUP_APP_L1_WAIT_S=0 (tests/app/test_background_start.py).
    env["LOOKUP_APP_L1_WAIT_S"] = str(WAIT_MS / 1000)
    env.update(env_extra or {})
    log = tmp / "streamlit.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--browser.gatherUsageStats",
                "false",
                "--server.fileWatcherType",
                "none",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    app = RunningApp(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + WAIT_MS / 1000
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
    raise AssertionError(
        f"streamlit did not answer /_stcore/health in {WAIT_MS / 1000:.0f} s:\n{log.read_text(errors='replace')}"
    )


@pytest.fixture(scope="module")
def browser():
    needs_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watch_runs(context)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    expect.set_options(timeout=WAIT_MS)
    yield tab
    context.close()


# --- helpers -------------------------------------------------------------------------------------------------
def wait_idle(page) -> None:
    """Until no script run is going on (right after a page load the state is 'initial', never 'notRunning')."""
    page.wait_for_function(IDLE, timeout=WAIT_MS)


def rerun(page, action) -> None:
    """Do `action` (one that reruns the script: Enter in a text box, a button) and wait until that run has
    finished. Elements drawn lazily after it (charts, data grids) are waited for where they are read."""
    script_run(page, action, timeout_ms=WAIT_MS)


def open_page(page, app: RunningApp, path: str = "") -> None:
    """Load a URL and wait for its first script run to finish (every page starts with a title)."""
    page.goto(f"{app.url}/{path}")
    page.locator('[data-testid="stMain"] h1').first.wait_for()
    wait_idle(page)


def open_connected(page, app: RunningApp, path: str = "") -> None:
    """open_page, then wait until the sidebar says L1 is connected: the app's first page renders while Weaviate and
    the model load (L1 starting), and a lookup typed before then answers from L0 alone, with no support estimate."""
    open_page(page, app, path)
    expect(page.get_by_text("L1 connected")).to_be_visible()
    wait_idle(page)  # the sidebar is drawn first: the run that says so may still be drawing the page


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
    wait_idle(page)
    page.evaluate("() => document.fonts.ready.then(() => true)")
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


def enter_text(box, text: str, key: str = "Enter") -> None:
    """Type `text` into a text box and press `key`, and wait for the run that sends it (submit_text)."""
    submit_text(box, text, timeout_ms=WAIT_MS, key=key)


def type_query(page, text: str) -> None:
    enter_text(page.get_by_label("Query", exact=True), text)
    expect(page.get_by_text("Why here").or_(page.get_by_text("No result", exact=True)).first).to_be_visible()


def open_candidates(page) -> None:
    """Open the Lookup page's L1 candidates (an expander: the answer comes first)."""
    page.get_by_text(re.compile(r"^L1 candidates: ")).first.click()
    page.locator('[data-testid="stTable"]').nth(1).wait_for()


def alert(page, text: str):
    """The one st.info/warning/error/success box that contains `text`."""
    return page.locator('[data-testid="stAlert"]').filter(has_text=text)


METRICS = """ms => ms.map(m => ['stMetricLabel', 'stMetricValue']
  .map(id => m.querySelector(`[data-testid="${id}"]`)).map(e => e ? e.innerText.trim() : ''))"""


def metric_values(page) -> dict[str, str]:
    """Every metric's label and value once no script run is going on, read in one go: a page drawn anew while its
    metrics were read one by one could take away the one being read."""
    wait_idle(page)
    return dict(page.eval_on_selector_all('[data-testid="stMetric"]', METRICS))
