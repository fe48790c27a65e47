"""The Sweep page's heatmap in chromium at 1280 and 390 wide: one tick per swept value on each axis, no axis past
the grid, and a title that fits the chart."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..helpers.browser import assert_no_exception, enter_text, open_connected, rerun, shot, start_app, wait_idle

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def sample_app(tmp_path_factory, base_settings, sample_store):
    app = start_app(tmp_path_factory.mktemp("app-sweep"), base_settings, collection="TestSample")
    yield app
    app.stop()


def test_the_sweep_heatmap_fits_its_grid_on_a_desktop_and_a_phone(page, sample_app):
    page.set_viewport_size({"width": 390, "height": 844})  # a phone first: its sidebar starts folded
    open_connected(page, sample_app, "sweep")
    grid = page.get_by_label("Grid", exact=True)
    enter_text(grid, "vector_weight=1,1.5;l0_weight=0.1,0.2")
    rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Sweep 4 points")).click())
    assert_no_exception(page, "sweep")
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 844})
        wait_idle(page)
        chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".heatmaplayer")).first
        chart.scroll_into_view_if_needed()
        expect(chart.locator(".xtick text").first).to_be_visible()
        assert chart.locator(".xtick text").all_text_contents() == ["1.0", "1.5"], f"x ticks past the grid at {width}"
        assert chart.locator(".ytick text").all_text_contents() == ["0.1", "0.2"], f"y ticks past the grid at {width}"
        box, title = chart.bounding_box(), chart.locator(".gtitle").first.bounding_box()
        assert box and title and title["x"] + title["width"] <= box["x"] + box["width"] + 1, (
            f"the title runs out of the chart at {width}: {title} in {box}"
        )
        shot(page, f"sample-sweep-heatmap-{width}")
