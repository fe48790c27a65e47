"""Waiting for a Streamlit app's script runs in chromium (retrieval.bench.script_runs), on pages that keep the
frontend's rules: the state attribute, a text box's blur and Enter, and the server's run messages on the WebSocket."""

from __future__ import annotations

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.SessionStatus_pb2 import SessionStatus

from retrieval.bench.script_runs import script_run, submit_text, watch_runs
from retrieval.errors import ScriptRunError

pytestmark = pytest.mark.browser


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


def test_a_script_run_asked_for_during_another_run_is_waited_for_to_its_end(browser):
    page = browser.new_page()
    try:
        page.set_content(STATE_PAGE)
        script_run(page, lambda: page.click("#go"), timeout_ms=60_000)
        assert page.evaluate("window.clicks") == 1
        assert page.get_attribute('[data-testid="stApp"]', "data-test-script-state") == "notRunning"
        script_run(page, lambda: page.click("#go"), timeout_ms=60_000)  # from an idle page
        assert page.evaluate("window.__benchRuns") == 2
    finally:
        page.close()


def test_an_action_the_page_dropped_is_done_once_more_and_its_run_waited_for(browser):
    page = browser.new_page()
    try:
        page.set_content(STATE_PAGE)
        page.evaluate("window.dropped = 1")
        script_run(page, lambda: page.click("#go"), timeout_ms=60_000, dropped_ms=2_000)
        assert page.evaluate("[window.clicks, window.dropped, window.__benchRuns]") == [1, 0, 1]
        script_run(page, lambda: page.click("#go"), timeout_ms=60_000, dropped_ms=2_000)  # none dropped
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


@pytest.mark.parametrize("trouble", ["thief", "redraw"])
def test_typed_text_is_sent_once_though_the_box_loses_focus_or_is_drawn_anew(browser, trouble):
    def text_page():
        page = browser.new_page()
        page.set_content(TEXT_PAGE)
        page.evaluate(f"window.{trouble} = true")
        return page, page.locator("#box")

    page, box = text_page()
    try:
        submit_text(box, "disk full", timeout_ms=60_000, dropped_ms=2_000)
        assert page.evaluate("[window.sent, window.__benchRuns]") == [["disk full"], 1]
    finally:
        page.close()
    # typing first and only the key as the action: the key finds nothing new, no run comes, and the error says so
    page, box = text_page()
    try:
        box.fill("disk full")
        with pytest.raises(ScriptRunError, match=r"no script run ended 3 s after the action, done twice") as err:
            script_run(page, lambda: box.press("Enter"), timeout_ms=3_000, dropped_ms=1_000)
        assert "'runs_counted': 0" in str(err.value), err.value
        # the blur sent the text before the key (and before the runs were counted); the box drawn anew sent nothing
        assert page.evaluate("window.sent") == {"thief": ["disk full"], "redraw": []}[trouble]
    finally:
        page.close()


# stApp drawn anew: the click replaces it with a new element, which then runs (initial → running → notRunning).
REDRAWN_PAGE = """
<div id="root"><div data-testid="stApp" data-test-script-state="notRunning"></div></div>
<button id="go">go</button>
<script>
  document.getElementById('go').onclick = () => {
    const app = document.createElement('div');
    app.setAttribute('data-testid', 'stApp');
    app.setAttribute('data-test-script-state', 'initial');
    document.getElementById('root').replaceChildren(app);
    setTimeout(() => app.setAttribute('data-test-script-state', 'running'), 20);
    setTimeout(() => app.setAttribute('data-test-script-state', 'notRunning'), 80);
  };
</script>
"""


def test_a_run_of_an_stapp_drawn_anew_is_counted(browser):
    page = browser.new_page()
    try:
        page.set_content(REDRAWN_PAGE)
        script_run(page, lambda: page.click("#go"), timeout_ms=20_000, dropped_ms=10_000)
        assert page.evaluate("window.__benchRuns") == 1
    finally:
        page.close()


# A run whose state never shows: the frontend took in the run's messages before drawing once, so stApp stays
# notRunning. The click sends the server's messages of one run (started, ended early for a rerun, started, ended)
# through a WebSocket of the page's own, as the app's socket would receive them.
SILENT_RUN_PAGE = """
<div data-testid="stApp" data-test-script-state="notRunning"></div>
<button id="go">go</button>
<script>
  window.clicks = 0;
  document.getElementById('go').onclick = () => {
    window.clicks++;
    const ws = new WebSocket('ws://127.0.0.1:9/_stcore/stream');  // never connects: only its message events matter
    ws.addEventListener('error', () => {});
    setTimeout(() => {
      for (const bytes of window.runMessages)
        ws.dispatchEvent(new MessageEvent('message', {data: new Uint8Array(bytes).buffer}));
    }, 50);
  };
</script>
"""


def run_messages() -> list[list[int]]:
    status = ForwardMsg.ScriptFinishedStatus
    running, idle = (ForwardMsg(session_status_changed=SessionStatus(script_is_running=r)) for r in (True, False))
    msgs = [running, ForwardMsg(script_finished=status.FINISHED_EARLY_FOR_RERUN), running]
    msgs += [ForwardMsg(script_finished=status.FINISHED_SUCCESSFULLY), idle]
    return [list(m.SerializeToString()) for m in msgs]


def silent_run_page(browser, *, hooked: bool):
    page = browser.new_page()
    if hooked:
        watch_runs(page)
    page.route("http://app.test/", lambda route: route.fulfill(content_type="text/html", body=SILENT_RUN_PAGE))
    page.goto("http://app.test/")
    page.evaluate("m => { window.runMessages = m; }", run_messages())
    return page


def test_a_run_whose_state_never_shows_is_counted_from_the_servers_messages(browser):
    page = silent_run_page(browser, hooked=True)
    try:
        script_run(page, lambda: page.click("#go"), timeout_ms=60_000, dropped_ms=10_000)
        # one start counted per running status, one end (the run ended early for a rerun is not an end)
        assert page.evaluate("[window.clicks, window.__benchWs.started, window.__benchWs.finished]") == [1, 2, 1]
    finally:
        page.close()
    # without the WebSocket hook only the state attribute is watched: the run is not seen, and the error says so
    page = silent_run_page(browser, hooked=False)
    try:
        with pytest.raises(ScriptRunError, match=r"no script run ended 3 s after the action, done twice"):
            script_run(page, lambda: page.click("#go"), timeout_ms=3_000, dropped_ms=1_000)
    finally:
        page.close()
