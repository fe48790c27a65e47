"""The app's first page does not wait for Weaviate: with an embedded server of its own starting cold, the Lookup
page renders at once with an "L1 starting" status, turns to "L1 connected" by itself once the server is up, and a
page that needs L1 waits for it. Chromium and the app as in test_browser; the server is stopped
with the app."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from ..conftest import free_port
from ..helpers.browser import assert_no_exception, start_app, wait_idle
from ..helpers.processes import stop_servers, weaviate_pids

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture
def cold_app(tmp_path, base_settings):
    port, grpc_port = free_port(), free_port()
    env = {
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),  # empty: a cold start of a new server
        "LOOKUP_WEAVIATE_PORT": str(port),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(grpc_port),
    }
    no_wait = {"LOOKUP_APP_L1_WAIT_S": "0"}  # the frame never waits: whatever the machine's speed, the page comes first
    app = start_app(tmp_path, base_settings, collection="ColdStart", weaviate_env=env, env_extra=no_wait)
    yield app, port
    app.stop()
    stop_servers(port)


def test_the_first_page_renders_while_weaviate_starts_and_connects_by_itself(page, cold_app):
    app, port = cold_app
    t0 = time.monotonic()
    page.goto(app.url)
    page.locator('[data-testid="stMain"] h1').filter(has_text="Lookup").wait_for()
    first_page_s = time.monotonic() - t0
    sidebar = page.locator('[data-testid="stSidebar"]')
    starting = sidebar.get_by_text("L1 starting")
    connected = sidebar.get_by_text("L1 connected")
    # the page is there before the server: a cold embedded start takes seconds, the rest of the page's run does not;
    # so once the query box is drawn, the sidebar still says the server is starting
    expect(page.get_by_label("Query", exact=True)).to_be_visible()
    assert starting.count() > 0, "the first page waited for Weaviate"
    assert page.get_by_text("L1 unavailable").count() == 0  # starting is not a failure
    expect(connected).to_be_visible()  # no click, no reload: the status looks again and reruns the page
    connected_s = time.monotonic() - t0
    assert weaviate_pids(port), "the app started its own Weaviate"
    wait_idle(page)
    assert_no_exception(page, "the first page of a cold start")
    print(f"first page {first_page_s:.1f} s, L1 connected {connected_s:.1f} s after the request")


def test_a_page_that_needs_l1_waits_for_it_and_then_works(page, cold_app):
    app, _ = cold_app
    page.goto(f"{app.url}/corpus")
    page.locator('[data-testid="stMain"] h1').filter(has_text="Corpus").wait_for()
    # the page's own title is out first; its index state follows once Weaviate is up
    expect(page.get_by_text("L1 connected")).to_be_visible()
    wait_idle(page)
    expect(page.get_by_role("button", name="Ingest", exact=True)).to_be_enabled()
    assert page.get_by_text("L1 unavailable").count() == 0
    assert_no_exception(page, "corpus during a cold start")
