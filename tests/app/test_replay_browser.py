"""Replay's comparison on Invocations in chromium at 1280x800 and 390x844: the calls recorded with L1 on, replayed with
it off; the overlap, RBO and support figures shown, fitting the screen, and the calls that moved most queued by one
button."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.records.invocations import InvocationStore

from ..helpers.browser import assert_no_exception, metric_values, open_connected, rerun, shot, start_app, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

QUERIES = ("PostgreSQL replication lag on the standby", "zebra quantum marmalade", "Pod keeps restarting")


@pytest.fixture(scope="module")
def replay_app(tmp_path_factory, base_settings, sample_corpus, sample_store, embedder):
    tmp = tmp_path_factory.mktemp("app-replay")
    store = InvocationStore(tmp / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, store)
    for query in QUERIES:
        lookup_knowledge(query, services, base_settings.with_(collection="TestSample", session_tag="seed").options())
    store.close()
    app = start_app(tmp, base_settings, collection="TestSample")
    yield app
    app.stop()


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_replay_comparison_fits_and_queues_the_calls_that_moved(page, replay_app, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_connected(page, replay_app, "invocations?l1=false")  # the changed setting: L1 off
    page.get_by_text("Replay these calls under the current settings").click()
    rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Replay 3 calls")).click())
    assert_no_exception(page, f"replay at {width}")
    expect(page.get_by_text("Mean RBO")).to_be_visible()
    values = metric_values(page)
    assert values["Now empty"] == "1" and 0.0 <= float(values["Mean RBO"]) < 1.0, values
    assert float(values["Mean overlap@k"]) < 1.0 and values["Mean support change"] == "–"  # L0 alone: no estimate after
    expect(page.get_by_text("By the domain of the recorded top result")).to_be_visible()
    expect(page.get_by_text("The calls, those that moved most first")).to_be_visible()
    button = page.get_by_role("button", name=re.compile(r"^Queue the \d calls that moved most for judging"))
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, f"the button runs off the screen at {width}: {box}"
    overflow = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollWidth")
    assert overflow <= width, f"the page scrolls sideways at {width}: {overflow}"
    shot(page, f"sample-replay-comparison-{width}")
    rerun(page, button.click)
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"\d calls wait first in the judging queue"))).to_be_visible()
