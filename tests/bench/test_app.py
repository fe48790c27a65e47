"""The bench's model and app figures (retrieval.bench.app), on the real model: a fresh Embedder's load and
query-embedding times, and RSS read from /proc. The real app's memory is measured in test_bench's smoke run.
Only that figures are there and plausible is asserted, never how fast."""

from __future__ import annotations

import os

import pytest

from retrieval.bench import app as bench_app
from retrieval.bench.app import model_figures, probe_queries, rss_mb


def test_probe_queries_are_distinct_and_as_many_as_asked():
    for count in (5, 58, 61, 120):
        texts = probe_queries(count, seed=3)
        assert len(texts) == count and len(set(texts)) == count


def test_a_fresh_embedder_reports_its_load_and_distinct_query_embeddings(embedder):
    probe, fig = model_figures(embedder.name, model_dir=None, queries=probe_queries(51, seed=1))
    assert probe is not embedder  # fresh: loaded here, empty query cache
    assert fig["name"] == embedder.name and fig["load_s"] > 0
    q = fig["query_embed"]
    assert q["queries"] == 50 and q["first_ms"] > 0 and 0 < q["p50_ms"] <= q["p95_ms"]
    with pytest.raises(ValueError, match="distinct"):
        model_figures(embedder.name, model_dir=None, queries=["same", "same"])


def test_rss_of_a_live_process_and_of_none():
    mine = rss_mb(os.getpid())
    assert mine is not None and 50 < mine["now_mb"] <= mine["peak_mb"]
    assert rss_mb(2**22 + 12345) is None  # above the kernel's pid_max: no such process


def test_without_chromium_the_app_figure_says_why(monkeypatch, base_settings, tmp_path):
    monkeypatch.setattr(bench_app, "CHROMIUM", str(tmp_path / "no-chromium"))
    out = bench_app.app_memory(base_settings, None, None, workdir=tmp_path, run_id="00000", log=lambda m: None)
    assert out["rss_mb"] is None and "no-chromium is missing" in out["why"]


# Streamlit's rules for data-test-script-state, as its frontend keeps them: a widget used while a run is going on
# joins that run (the state stays "running" until it ends); used on an idle page, it starts a run of its own.
STATE_PAGE = """
<div data-testid="stApp" data-test-script-state="running"></div>
<button id="go">go</button>
<script>
  const app = document.querySelector('[data-testid="stApp"]');
  window.clicks = 0;
  window.dropped = 0;  // how many clicks to come are lost, as a click on an element being drawn anew is
  const runFor = ms => { app.setAttribute('data-test-script-state', 'running');
                         setTimeout(() => app.setAttribute('data-test-script-state', 'notRunning'), ms); };
  setTimeout(() => app.setAttribute('data-test-script-state', 'notRunning'), 1500);  // a run under way at the start
  document.getElementById('go').onclick = () => {
    if (window.dropped > 0) { window.dropped--; return; }
    window.clicks++;
    if (app.getAttribute('data-test-script-state') !== 'running') runFor(50);
  };
</script>
"""


@pytest.mark.browser
def test_a_script_run_asked_for_during_another_run_is_waited_for_to_its_end(browser):
    page = browser.new_page()
    try:
        page.set_content(STATE_PAGE)
        bench_app.script_run(page, lambda: page.click("#go"), timeout_ms=60_000)
        assert page.evaluate("window.clicks") == 1
        assert page.get_attribute('[data-testid="stApp"]', "data-test-script-state") == "notRunning"
        bench_app.script_run(page, lambda: page.click("#go"), timeout_ms=60_000)  # from an idle page
        assert page.evaluate("window.__benchRuns") == 2
    finally:
        page.close()


@pytest.mark.browser
def test_an_action_the_page_dropped_is_done_once_more_and_its_run_waited_for(browser):
    page = browser.new_page()
    try:
        page.set_content(STATE_PAGE)
        page.evaluate("window.dropped = 1")
        bench_app.script_run(page, lambda: page.click("#go"), timeout_ms=60_000, dropped_ms=2_000)
        assert page.evaluate("[window.clicks, window.dropped, window.__benchRuns]") == [1, 0, 1]
        bench_app.script_run(page, lambda: page.click("#go"), timeout_ms=60_000, dropped_ms=2_000)  # none dropped
        assert page.evaluate("[window.clicks, window.__benchRuns]") == [2, 2]
    finally:
        page.close()


# Streamlit's rules for a text box, as its frontend keeps them: typing makes the box dirty; Enter or a blur sends a
# dirty box's value (a run), and Enter on a box with nothing new does nothing. `thief` takes the focus once, right
# after the first typing, as a part of the page drawn late can; `redraw` empties the box once, right after typing.
TEXT_PAGE = """
<div data-testid="stApp" data-test-script-state="notRunning"></div>
<input id="box"><button id="late">late</button>
<script>
  const app = document.querySelector('[data-testid="stApp"]');
  const box = document.getElementById('box');
  window.sent = [];
  window.thief = false;
  window.redraw = false;
  let dirty = false;
  const send = () => { if (!dirty) return; dirty = false; window.sent.push(box.value);
                       app.setAttribute('data-test-script-state', 'running');
                       setTimeout(() => app.setAttribute('data-test-script-state', 'notRunning'), 50); };
  box.addEventListener('input', () => {
    dirty = true;
    if (window.thief) { window.thief = false; document.getElementById('late').focus(); }
    if (window.redraw) { window.redraw = false; box.value = ''; dirty = false; }
  });
  box.addEventListener('blur', send);
  box.addEventListener('keydown', e => { if (e.key === 'Enter') send(); });
</script>
"""


@pytest.mark.browser
@pytest.mark.parametrize("trouble", ["thief", "redraw"])
def test_typed_text_is_sent_once_though_the_box_loses_focus_or_is_drawn_anew(browser, trouble):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page()
    try:
        page.set_content(TEXT_PAGE)
        box = page.locator("#box")
        page.evaluate(f"window.{trouble} = true")
        bench_app.submit_text(page, box, "disk full", timeout_ms=60_000, dropped_ms=2_000)
        assert page.evaluate("[window.sent, window.__benchRuns]") == [["disk full"], 1]
        # typing first and sending the key as the action: the key finds nothing new, and no run comes
        page.set_content(TEXT_PAGE)
        page.evaluate(f"window.{trouble} = true")
        box.fill("disk full")
        with pytest.raises(PlaywrightTimeout):
            bench_app.script_run(page, lambda: box.press("Enter"), timeout_ms=3_000, dropped_ms=1_000)
    finally:
        page.close()
