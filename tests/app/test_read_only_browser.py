"""Read-only mode in a real browser (LOOKUP_READ_ONLY=1): the rows of every table of the invocation database,
counted before and after each page's actions, change only for the lookup a visitor types; the pages say
what read-only does. Chromium and the app as in test_browser."""

from __future__ import annotations

import re
from urllib.parse import quote_plus

import pytest
from playwright.sync_api import expect

from retrieval.config import REPO_ROOT

from ..helpers.browser import alert, assert_no_exception, open_page, rerun, shot, start_app, type_query
from ..helpers.db_rows import changed, table_rows

pytestmark = [pytest.mark.slow, pytest.mark.browser]

LOOKUP_TABLES = {  # what one recorded lookup writes
    "tool_invocation",
    "invocation_keyword",
    "invocation_result",
    "invocation_hourly",
    "invocation_histogram",
    "invocation_keyword_count",
}
UNANSWERABLE = "eval_sets/sample-ops-unanswerable.yaml"  # 10 cases: a short run of every configuration


def settled_rows(page, app, db) -> dict[str, int]:
    """Open Invocations (it moves the rows the app spooled into DuckDB before reading), then count."""
    open_page(page, app, "invocations")
    assert_no_exception(page, "invocations")
    return table_rows(db)


def test_read_only_with_recording_writes_only_the_lookups_a_visitor_types(page, tmp_path_factory, base_settings, sample_store):
    tmp = tmp_path_factory.mktemp("app-read-only-rows")
    db = tmp / "invocations.duckdb"
    repo_sets = sorted((REPO_ROOT / "eval_sets").iterdir())
    env = {"LOOKUP_READ_ONLY": "1", "LOOKUP_READ_ONLY_RECORDS": "1"}
    app = start_app(tmp, base_settings, collection="TestSample", env_extra=env)
    try:
        start = settled_rows(page, app, db)
        sidebar = page.get_by_test_id("stSidebarUserContent")
        expect(sidebar.get_by_text("Only the lookups typed on Lookup are recorded")).to_be_visible()
        expect(sidebar.get_by_text("Typed lookups recorded")).to_be_visible()

        # Lookup: a typed query is recorded, once
        open_page(page, app)
        type_query(page, "Disk full on the Postgres primary")
        typed = settled_rows(page, app, db)
        assert typed["tool_invocation"] == start.get("tool_invocation", 0) + 1
        assert set(changed(start, typed)) <= LOOKUP_TABLES, changed(start, typed)

        # Lookup opened from a URL, and its judging form: nothing written, judging says it is off
        open_page(page, app, "?q=" + quote_plus("Vault is sealed"))
        page.get_by_text("Judge these results").click()
        expect(page.get_by_text("Judging is off: the app is read-only")).to_be_visible()
        assert changed(typed, settled_rows(page, app, db)) == {}

        # Evaluate: says what read-only does, offers no recording, saves no run
        open_page(page, app, "evaluate?es=" + quote_plus(UNANSWERABLE))
        expect(alert(page, "a run here is neither saved on the Runs page nor recorded")).to_be_visible()
        expect(page.get_by_label(re.compile("^Record the lookups in the invocation store"))).to_be_disabled()
        rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Run 10 cases")).click())
        assert_no_exception(page, "evaluate, read-only")
        expect(page.get_by_text("Run tag").first).to_be_visible()  # the run finished and is shown
        expect(page.get_by_text("Saved as run")).to_have_count(0)
        shot(page, "sample-evaluate-read-only")
        evaluated = settled_rows(page, app, db)
        assert changed(typed, evaluated) == {}

        # Invocations → Replay: recording is off, the replay writes nothing
        page.get_by_text("Replay these calls under the current settings").click()
        expect(page.get_by_text("Recording is off: the app is read-only")).to_be_visible()
        expect(page.get_by_label("Record the replayed calls")).to_be_disabled()
        rerun(page, lambda: page.get_by_role("button", name=re.compile(r"^Replay \d+ calls")).click())
        expect(page.get_by_text("nothing recorded")).to_be_visible()
        assert_no_exception(page, "replay, read-only")
        replayed = settled_rows(page, app, db)
        assert changed(evaluated, replayed) == {}

        # Runs and Sweep read: no table made, no row written
        for path in ("runs", "sweep"):
            open_page(page, app, path)
            assert_no_exception(page, path)
        after = settled_rows(page, app, db)
        assert after == replayed, changed(replayed, after) or sorted(set(after) ^ set(replayed))
    finally:
        app.stop()
    assert sorted((REPO_ROOT / "eval_sets").iterdir()) == repo_sets
    assert not (tmp / "judged-eval-sets").exists()


def test_read_only_by_default_records_nothing_at_all(page, tmp_path_factory, base_settings, sample_store):
    """A demo leaves no trace: read-only without LOOKUP_READ_ONLY_RECORDS, a typed lookup writes no row, and the badge
    and the Lookup page say so."""
    tmp = tmp_path_factory.mktemp("app-read-only-silent")
    db = tmp / "invocations.duckdb"
    app = start_app(tmp, base_settings, collection="TestSample", env_extra={"LOOKUP_READ_ONLY": "1"})
    try:
        start = settled_rows(page, app, db)
        sidebar = page.get_by_test_id("stSidebarUserContent")
        expect(sidebar.get_by_text("Nothing recorded")).to_be_visible()
        open_page(page, app)
        type_query(page, "Disk full on the Postgres primary")
        expect(page.get_by_text("the app is read-only and records no lookup")).to_be_visible()
        assert changed(start, settled_rows(page, app, db)) == {}
        shot(page, "sample-lookup-read-only-silent")
    finally:
        app.stop()
