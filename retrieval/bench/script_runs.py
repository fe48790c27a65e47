"""Driving a Streamlit app in a Playwright page: do an action (a click, Enter in a box) and wait for the script run
it causes to end, seen from the page's state attribute and from the server's own run messages (the bench's app
figures and the browser tests use it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrieval.errors import ScriptRunError

# A run is seen two ways. stApp's data-test-script-state, watched by a MutationObserver; but on a busy machine the
# frontend can take in a whole short run's messages before it draws once, and the state never leaves notRunning. So
# a page opened after `watch_runs` also counts the server's messages on the app's WebSocket, read from the ForwardMsg
# protobuf's top-level fields: field 9 session_status_changed {2: script_is_running}, field 6 script_finished (an
# enum; 2 = FINISHED_EARLY_FOR_RERUN, a run stopped for the next one). The tests build their messages from the
# installed protos (tests/bench/test_script_runs.py).
WS_HOOK = """(() => {
  if (window.__benchWs) return;
  const counts = window.__benchWs = {started: 0, finished: 0};
  const varint = (b, p) => { let x = 0, s = 0, c;
    do { c = b[p.i++]; x += (c & 0x7f) * 2 ** s; s += 7; } while (c & 0x80 && p.i < b.length); return x; };
  const fields = b => { const p = {i: 0}, out = [];
    while (p.i < b.length) {
      const tag = varint(b, p), f = Math.floor(tag / 8), w = tag % 8;
      if (w === 0) out.push([f, varint(b, p)]);
      else if (w === 2) { const n = varint(b, p); out.push([f, b.subarray(p.i, p.i + n)]); p.i += n; }
      else if (w === 1) p.i += 8; else if (w === 5) p.i += 4; else break;
    }
    return out; };
  const read = data => {
    if (!(data instanceof ArrayBuffer)) return;
    for (const [f, v] of fields(new Uint8Array(data))) {
      if (f === 6 && v !== 2) counts.finished++;
      if (f === 9 && fields(v).some(([g, x]) => g === 2 && x === 1)) counts.started++;
    } };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); this.addEventListener('message', e => { try { read(e.data); } catch (_) {} }); }
  };
})();"""
# The state attribute's changes, however short (a run that starts and ends between two polls is counted); the whole
# document is watched, so an stApp element drawn anew is counted too. Returns the counts, or null without an stApp.
COUNTS = """() => {
  if (!document.querySelector('[data-testid="stApp"]')) return null;
  if (window.__benchRuns === undefined) {
    window.__benchRuns = 0;
    window.__benchStates = [];  // the last changes, [ms since the page loaded, from, to], for an error to show
    new MutationObserver(records => {
      for (const r of records) {
        if (r.oldValue === 'notRunning' || r.oldValue === 'initial') window.__benchRuns++;
        window.__benchStates.push([Math.round(performance.now()), r.oldValue, r.target.getAttribute(r.attributeName)]);
      }
      window.__benchStates.splice(0, window.__benchStates.length - 12);
    }).observe(document.documentElement,
               {subtree: true, attributes: true, attributeFilter: ['data-test-script-state'], attributeOldValue: true});
  }
  const ws = window.__benchWs;
  return {runs: window.__benchRuns, started: ws ? ws.started : 0, finished: ws ? ws.finished : 0,
          ms: Math.round(performance.now())};
}"""
IDLE = """() => { const app = document.querySelector('[data-testid="stApp"]');
                  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""
STARTED = """([b]) => { const ws = window.__benchWs;
  return window.__benchRuns > b.runs || (!!ws && (ws.started > b.started || ws.finished > b.finished)); }"""
RUN_DONE = """([b]) => { const app = document.querySelector('[data-testid="stApp"]'), ws = window.__benchWs;
  const ended = ws ? ws.finished > b.finished : window.__benchRuns > b.runs;
  return ended && !!app && app.getAttribute('data-test-script-state') === 'notRunning'; }"""
PAGE_STATE = """() => { const app = document.querySelector('[data-testid="stApp"]'), f = document.activeElement;
  const status = document.querySelector('[data-testid="stStatusWidget"], [data-testid="stConnectionStatus"]');
  return {now_ms: Math.round(performance.now()), script: app && app.getAttribute('data-test-script-state'),
          runs_counted: window.__benchRuns ?? null, server_messages: window.__benchWs ?? null,
          last_changes: window.__benchStates ?? null, status: status ? status.innerText.trim() : '',
          focused: f && (f.getAttribute('aria-label') || f.tagName), focused_value: f && 'value' in f ? f.value : null,
          url: location.href}; }"""
DROPPED_MS = 60_000.0  # an idle page that has started no run this long after the action dropped it: done once more


def watch_runs(target: Any) -> None:
    """Count the server's run messages in every page `target` (a Playwright browser context or page) opens from now."""
    target.add_init_script(WS_HOOK)


def script_run(page: Any, action: Callable[[], object], *, timeout_ms: float, dropped_ms: float = DROPPED_MS) -> None:
    """Do `action` (one that reruns the script: Enter in a text box, a button) and wait until its run has finished.
    It starts from an idle page (a widget used during a run joins it); an action the page dropped is done once more."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_function(IDLE, timeout=timeout_ms)
    before = page.evaluate(COUNTS)
    if before is None:
        raise ScriptRunError("the app is not loaded: the page has no stApp")
    action()
    times, dropped_wait = "once", min(dropped_ms, timeout_ms)
    try:
        page.wait_for_function(STARTED, arg=[before], timeout=dropped_wait)
    except PlaywrightTimeout:
        if not page.evaluate(IDLE):
            raise
        action()  # the page is idle and no run started: the click or key press never reached the widget
        times = f"twice (no run started {dropped_wait / 1000:.0f} s after the first)"
    try:
        page.wait_for_function(RUN_DONE, arg=[before], timeout=timeout_ms)
    except PlaywrightTimeout as exc:
        raise ScriptRunError(
            f"no script run ended {timeout_ms / 1000:.0f} s after the action, done {times}; before it: {before}; "
            f"the page now: {page.evaluate(PAGE_STATE)}"
        ) from exc


def submit_text(box: Any, text: str, *, timeout_ms: float, key: str = "Enter", dropped_ms: float = DROPPED_MS) -> None:
    """Type `text` into a box (a Playwright locator) and press `key` as one action, and wait for the run that sends
    it: a box that sent it on a blur before the key is counted, and one drawn anew (its text gone) is typed again."""

    def type_and_send() -> None:
        box.fill(text)
        box.press(key)

    script_run(box.page, type_and_send, timeout_ms=timeout_ms, dropped_ms=dropped_ms)
