"""The Traffic page in chromium at 1280 and 390 wide, read-only, over a store filled by real lookups: the estimate, its
calibration and trend chart, the traffic beside the sample eval set and the judging queue are shown, and no table of the
store changes."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from retrieval import open_lookup

from ..helpers.browser import assert_no_exception, metric_values, open_connected, shot, start_app, wait_idle
from ..helpers.db_rows import changed, table_rows

pytestmark = [pytest.mark.slow, pytest.mark.browser]

QUERIES = (("agent", "Pod keeps restarting"), ("agent", "disk full on the database volume"), ("bot", "Vault is sealed"))


def test_the_traffic_page_read_only_on_a_desktop_and_a_phone(page, tmp_path_factory, base_settings, sample_store, embedder):
    tmp = tmp_path_factory.mktemp("app-traffic")
    settings = base_settings.with_(collection="TestSample", db_path=tmp / "invocations.duckdb")
    with open_lookup(settings, embedder=embedder) as kb:
        for tag, query in QUERIES:
            kb.lookup(query, session_tag=tag)
    before = table_rows(settings.invocation_db)
    assert before["tool_invocation"] == len(QUERIES)
    app = start_app(tmp, base_settings, collection="TestSample", env_extra={"LOOKUP_READ_ONLY": "1"})
    try:
        for width, height in ((1280, 800), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            open_connected(page, app, "traffic")
            assert_no_exception(page, f"traffic at {width}")
            main = page.get_by_test_id("stMain")
            expect(main.get_by_text("Estimated quality (label-free)")).to_be_visible()
            values = metric_values(page)
            assert values["Calls"] == "3" and values["Estimated hit@1"].endswith("%"), values
            expect(main.get_by_text("Calibration: support read against")).to_be_visible()
            chart = page.locator('[data-testid="stPlotlyChart"]').first
            chart.scroll_into_view_if_needed()
            expect(chart.locator(".gtitle").first).to_contain_text("Estimated hit@1 per day")
            box = chart.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, f"the chart runs out of the page at {width}"
            beside = main.get_by_text("The traffic beside the eval sets")
            beside.scroll_into_view_if_needed()
            expect(beside).to_be_visible()
            expect(main.get_by_text("Divergence: Jensen").first).to_be_visible()
            sentence = main.get_by_text(re.compile(r"of calls .*; the chosen eval set \(sample-ops-alerts\) has \d+% such"))
            expect(sentence.first).to_be_visible()  # the largest difference, in words
            queue = main.get_by_text("Which calls to judge next")
            queue.scroll_into_view_if_needed()
            expect(queue).to_be_visible()
            expect(main.get_by_text("3 of up to 20 calls from 3 in the window")).to_be_visible()
            wide = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollWidth")
            assert wide <= width + 1, f"the page scrolls sideways at {width}: {wide}"
            wait_idle(page)
            shot(page, f"traffic-{width}")
    finally:
        app.stop()
    assert changed(before, table_rows(settings.invocation_db)) == {}
