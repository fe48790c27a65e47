"""The Invocations dashboard over real DuckDB files: the filter as data (one table of inputs -> SQL and
params), the same filters against hand-made rows in a real file, every frame of the page, and rows
written by real L0-only lookups. Nothing is mocked."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
import pytest

from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge, to_record
from retrieval.core.protocols import LookupServices
from retrieval.core.record import TOOL_NAME, InvocationRecord
from retrieval.records.dashboard import (
    SAMPLE_CALLS,
    STAGES,
    InvocationFilter,
    details_for,
    export_frame,
    filter_options,
    load_dashboard,
    pick_bucket,
    result_for,
    telling,
)
from retrieval.records.invocations import COLUMNS, InvocationStore

from ..conftest import SAMPLE_CORPUS

UTC = UTC
PLUS_ONE = timezone(timedelta(hours=1))
TS = "created_at >= CAST(? AS TIMESTAMPTZ)"
TU = "created_at < CAST(? AS TIMESTAMPTZ)"
TEXT = "contains(lower(input), lower(?))"


# --- InvocationFilter.where(): inputs -> (where_sql, params) -----------------------------------------
@pytest.mark.parametrize(
    "flt, sql, params",
    [
        (InvocationFilter(), "TRUE", []),
        (InvocationFilter(since=datetime(2024, 3, 1, 12)), TS, ["2024-03-01T12:00:00+00:00"]),  # naive = UTC
        (InvocationFilter(until=datetime(2024, 3, 3, 0, 0, tzinfo=PLUS_ONE)), TU, ["2024-03-03T00:00:00+01:00"]),
        (
            InvocationFilter(since=datetime(2024, 3, 1, tzinfo=UTC), until=datetime(2024, 3, 2, tzinfo=UTC)),
            f"{TS} AND {TU}",
            ["2024-03-01T00:00:00+00:00", "2024-03-02T00:00:00+00:00"],
        ),
        (InvocationFilter(layers=("L0",)), "layer IN (?)", ["L0"]),
        (InvocationFilter(layers=("L0", "L1")), "layer IN (?, ?)", ["L0", "L1"]),
        (InvocationFilter(domains=("storage", "security")), "domain IN (?, ?)", ["storage", "security"]),
        (InvocationFilter(statuses=("empty",)), "status IN (?)", ["empty"]),
        (InvocationFilter(session_tags=("ci", "manual")), "session_tag IN (?, ?)", ["ci", "manual"]),
        (InvocationFilter(fallback_only=True), "fallback", []),
        (InvocationFilter(text="  Disk "), TEXT, ["Disk"]),
        (InvocationFilter(text="   "), "TRUE", []),
        (InvocationFilter(text="100%"), TEXT, ["100%"]),
        (
            InvocationFilter(
                since=datetime(2024, 1, 1),
                layers=("L0",),
                domains=("d",),
                statuses=("ok",),
                session_tags=("s",),
                fallback_only=True,
                text="x",
                until=datetime(2024, 2, 1),
            ),
            f"{TS} AND {TU} AND layer IN (?) AND domain IN (?) AND status IN (?) AND session_tag IN (?) AND fallback AND {TEXT}",
            ["2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00", "L0", "d", "ok", "s", "x"],
        ),
    ],
)
def test_where(flt, sql, params):
    assert flt.where() == (sql, params)


@pytest.mark.parametrize(
    "span, bucket",
    [
        (None, "hour"),
        (timedelta(0), "minute"),
        (timedelta(hours=3), "minute"),
        (timedelta(hours=3, seconds=1), "hour"),
        (timedelta(days=7), "hour"),
        (timedelta(days=7, seconds=1), "day"),
        (timedelta(days=90), "day"),
    ],
)
def test_pick_bucket(span, bucket):
    first = datetime(2024, 3, 1, tzinfo=UTC)
    assert pick_bucket(first, None if span is None else first + span) == bucket
    if span is None:
        assert pick_bucket(None, first) == "hour"


# --- a real file of hand-made rows --------------------------------------------------------------------
def _row(
    rid,
    created_at,
    text,
    *,
    layer,
    status="ok",
    domain,
    session,
    fallback,
    l1_status="ok",
    error=None,
    latency,
    timings,
    keywords=(),
):
    details = {
        "layer": layer,
        "fallback": fallback,
        "timings_ms": timings,
        "l0": {"matched_keywords": [{"term": t, "field": f, "weight": 1.0} for t, f in keywords]},
    }
    return InvocationRecord(
        rid,
        created_at,
        TOOL_NAME,
        text,
        status,
        layer,
        latency,
        {"results": []},
        details,
        error,
        session,
        domain,
        l1_status,
        fallback,
        None,
    )


ROWS = [
    _row(
        "a",
        "2024-03-01T09:00:00+00:00",
        "Pod keeps restarting",
        layer="L0+L1",
        domain="kubernetes",
        session="ci",
        fallback=False,
        latency=10.0,
        timings={"l0": 1.0, "embed": 3.0, "l1": 5.0, "fuse": 0.5, "total": 99.0},
        keywords=[("pod", "keyword"), ("restarting", "title")],
    ),
    _row(
        "b",
        "2024-03-01T09:30:00+00:00",
        "Disk 100% full on /var",
        layer="L0",
        domain="storage",
        session="ci",
        fallback=True,
        l1_status="failed",
        error="timed out",
        latency=20.0,
        timings={"l0": 2.0, "fuse": 0.5},
        keywords=[("disk", "keyword")],
    ),
    _row(
        "c",
        "2024-03-02T10:00:00+00:00",
        "disk_usage high",
        layer="L1",
        domain=None,
        session="manual",
        fallback=False,
        latency=30.0,
        timings={"l0": 3.0, "embed": 5.0, "l1": 7.0, "fuse": 1.5},
        keywords=[("disk", "keyword")],
    ),
    # 23:00 UTC on 2 March, written with an offset
    _row(
        "d",
        "2024-03-03T00:00:00+01:00",
        "Vault is sealed",
        layer="L0",
        domain="security",
        session="manual",
        fallback=True,
        l1_status="empty",
        latency=40.0,
        timings={"l0": 4.0, "fuse": 0.5, "l1": "n/a"},
        keywords=[("vault", "entity"), ("disk", "title")],
    ),
    _row(
        "e",
        "2024-03-04T12:00:00+00:00",
        "nothing here",
        layer="none",
        status="empty",
        domain=None,
        session="ci",
        fallback=False,
        latency=50.0,
        timings={},
    ),
]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    store = InvocationStore(tmp_path_factory.mktemp("dash") / "invocations.duckdb")
    for rec in ROWS:
        store.record(rec)
    store.flush()
    yield store
    store.close()


@pytest.mark.parametrize(
    "flt, ids",
    [
        (InvocationFilter(), "abcde"),
        (InvocationFilter(since=datetime(2024, 3, 2)), "cde"),
        (InvocationFilter(since=datetime(2024, 3, 3, 0, 0, tzinfo=PLUS_ONE)), "de"),  # since is inclusive
        (InvocationFilter(until=datetime(2024, 3, 2, 23, 0)), "abc"),  # until is exclusive
        (InvocationFilter(since=datetime(2024, 3, 1, 9, 30), until=datetime(2024, 3, 2, 10, 0, 1)), "bc"),
        (InvocationFilter(layers=("L0",)), "bd"),
        (InvocationFilter(layers=("L0", "L1")), "bcd"),
        (InvocationFilter(domains=("storage", "security")), "bd"),
        (InvocationFilter(statuses=("empty",)), "e"),
        (InvocationFilter(session_tags=("manual",)), "cd"),
        (InvocationFilter(fallback_only=True), "bd"),
        (InvocationFilter(text="DISK"), "bc"),
        (InvocationFilter(text="%"), "b"),  # a plain substring: not a LIKE wildcard
        (InvocationFilter(text="_"), "c"),
        (InvocationFilter(session_tags=("ci",), fallback_only=True), "b"),
        (InvocationFilter(layers=("L0",), text="vault"), "d"),
        (InvocationFilter(domains=("kubernetes",), statuses=("empty",)), ""),
    ],
)
def test_filtered_rows_are_exactly_the_expected_ones(made, flt, ids):
    dash = load_dashboard(made, flt)
    assert sorted(dash.rows["id"]) == list(ids)
    assert dash.total == len(ids)
    assert list(export_frame(made, flt)["id"]) == list(ids)  # oldest first
    assert list(dash.rows["id"]) == list(reversed(ids))  # newest first


def test_row_limit_keeps_the_newest(made):
    dash = load_dashboard(made, InvocationFilter(), row_limit=2)
    assert list(dash.rows["id"]) == ["e", "d"] and dash.total == 5


def test_frames_of_the_whole_file(made):
    dash = load_dashboard(made, InvocationFilter(), bucket="day")
    assert (dash.total, dash.fallbacks, dash.median_latency_ms, dash.fallback_rate) == (5, 2, 30.0, 0.4)
    assert dash.bucket == "day"

    def day(d: int) -> pd.Timestamp:
        return pd.Timestamp(f"2024-03-0{d}", tz="UTC")

    over = [(b.tz_convert("UTC"), layer, n) for b, layer, n in dash.calls_over_time.itertuples(index=False)]
    assert over == [(day(1), "L0", 1), (day(1), "L0+L1", 1), (day(2), "L0", 1), (day(2), "L1", 1), (day(4), "none", 1)]
    fb = [(b.tz_convert("UTC"), c, f, r) for b, c, f, r in dash.fallback_over_time.itertuples(index=False)]
    assert fb == [(day(1), 2, 1, 0.5), (day(2), 2, 1, 0.5), (day(4), 1, 0, 0.0)]
    assert list(dash.top_domains.itertuples(index=False, name=None)) == [("kubernetes", 1), ("security", 1), ("storage", 1)]
    assert dash.unrouted == 2  # c and e: routed to no domain, counted apart
    assert list(dash.top_keywords.itertuples(index=False, name=None)) == [
        ("disk", "keyword", 2),
        ("disk", "title", 1),
        ("pod", "keyword", 1),
        ("restarting", "title", 1),
        ("vault", "entity", 1),
    ]
    # by hand: l0 [1,2,3,4]; embed [3,5]; l1 [5,7] ("n/a" is skipped); fuse [.5,.5,1.5,.5]; "total" is no stage
    latency = dash.stage_latency.round(6)
    assert list(latency.itertuples(index=False, name=None)) == [
        ("l0", 4, 2.5, 3.85, 2.5),
        ("embed", 2, 4.0, 4.9, 4.0),
        ("l1", 2, 6.0, 6.9, 6.0),
        ("fuse", 4, 0.5, 1.35, 0.75),
    ]
    assert len(dash.stage_samples) == 12 and set(dash.stage_samples["stage"]) == set(STAGES)


@pytest.mark.parametrize(
    ("term", "field", "told"),
    [
        ("Set", "title", False),  # one word of a title ("Stateful Set"): matched often, tells little
        ("out", "name", False),  # one word of a file name
        ("the", "keyword", False),  # L0's stop words alone, whatever the field
        ("of the", None, False),
        ("disk", "keyword", True),  # a curated keyword, even of one word
        ("vault", "entity", True),
        ("etcd", "domain", True),
        ("crash looping", "title", True),  # a phrase of a title
        ("KubePodCrashLooping", "name", True),  # a whole file name: four match words
        ("restarting", None, True),  # no field known: kept
    ],
)
def test_a_chart_keyword_tells_something(term, field, told):
    assert telling(term, field) is told


def test_the_telling_keywords_leave_out_single_title_words_and_name_them(made):
    dash = load_dashboard(made, InvocationFilter())
    assert list(dash.telling_keywords.itertuples(index=False, name=None)) == [
        ("disk", "keyword", 2),
        ("pod", "keyword", 1),
        ("vault", "entity", 1),
    ]
    assert dash.hidden_keywords == ("disk", "restarting")  # what the chart's switch adds, most matched first
    assert len(dash.top_keywords) == 5  # every keyword is still counted


def test_frames_follow_the_filter(made):
    dash = load_dashboard(made, InvocationFilter(session_tags=("ci",)), top_n=2)
    assert (dash.total, dash.fallbacks, dash.median_latency_ms) == (3, 1, 20.0)
    assert dash.bucket == "hour"  # a..e span three days and three hours
    assert int(dash.calls_over_time["calls"].sum()) == 3
    assert list(dash.top_domains["domain"]) == ["kubernetes", "storage"]  # top_n = 2; e, routed nowhere, apart
    assert dash.unrouted == 1
    assert set(dash.stage_samples["id"]) == {"a", "b"}  # e has no timings
    assert list(dash.top_keywords.itertuples(index=False, name=None)) == [("disk", "keyword", 1), ("pod", "keyword", 1)]


def test_near_duplicate_keywords_count_as_one_and_unrouted_calls_stand_apart(tmp_path):
    store = InvocationStore(tmp_path / "invocations.duckdb")
    terms = [("pods", "kubernetes"), ("pods ", None), (" pods", None), ("pods\t", None), ("disk  full", "storage")]
    for i, (term, domain) in enumerate(terms):
        store.record(
            _row(
                f"r{i}",
                "2024-03-01T09:00:00+00:00",
                f"q{i}",
                layer="L0",
                domain=domain,
                session="s",
                fallback=False,
                latency=1.0,
                timings={},
                keywords=[(term, "keyword")],
            )
        )
    store.flush()
    # a rollup written before terms were trimmed: its twins add up when read
    store.with_connection(
        lambda con: con.execute("INSERT INTO invocation_keyword_count VALUES ('disk full ', 'keyword', 2)"), read_only=False
    )
    for flt in (InvocationFilter(), InvocationFilter(session_tags=("s",))):  # the rollup; the rows' own lists
        dash = load_dashboard(store, flt)
        got = list(dash.top_keywords.itertuples(index=False, name=None))
        want = [("pods", "keyword", 4), ("disk full", "keyword", 3 if flt == InvocationFilter() else 1)]
        assert sorted(got, key=lambda r: r[0]) == sorted(want, key=lambda r: r[0]), got
        assert list(dash.top_domains.itertuples(index=False, name=None)) == [("kubernetes", 1), ("storage", 1)]
        assert dash.unrouted == 3
    store.close()


@pytest.mark.parametrize(
    "flt",
    [
        InvocationFilter(fallback_only=True),
        InvocationFilter(text="disk"),
        InvocationFilter(layers=("L0",), session_tags=("manual",)),
        InvocationFilter(text="none"),
    ],
)
def test_top_keywords_count_only_matching_calls(made, flt):
    ids = set(load_dashboard(made, flt).rows["id"])
    want = Counter(
        k["term"] + "/" + k["field"] for r in ROWS if r.id in ids for k in r.retrieval_details["l0"]["matched_keywords"]
    )
    got = {f"{k}/{f}": n for k, f, n in load_dashboard(made, flt, top_n=50).top_keywords.itertuples(index=False)}
    assert got == dict(want)


def test_rows_lead_with_what_people_read_first(made):
    cols = list(load_dashboard(made, InvocationFilter()).rows.columns)
    assert cols[:5] == ["created_at", "input", "layer", "top_entry_id", "latency_ms"] and cols[-1] == "id"


def test_result_for_reads_one_row(made):
    from retrieval.records.dashboard import result_for

    assert result_for(made, "d") == {"results": []}
    assert result_for(made, "no-such-id") is None


def test_details_for_reads_one_row(made):
    assert details_for(made, "d")["l0"]["matched_keywords"][0] == {"term": "vault", "field": "entity", "weight": 1.0}
    assert details_for(made, "no-such-id") is None


def test_stage_samples_are_capped_but_stage_figures_cover_every_call(tmp_path):
    store = InvocationStore(tmp_path / "many.duckdb")
    n = SAMPLE_CALLS + 500
    for i in range(n):
        store.record(
            _row(
                f"r{i:05d}",
                "2024-03-01T09:00:00+00:00",
                "q7" if i % 10 == 7 and i % 3 == 0 else "q",
                layer="L0",
                domain=None,
                session="s",
                fallback=False,
                latency=1.0,
                timings={"l0": float(i)},
            )
        )
    dash = load_dashboard(store, InvocationFilter())
    store.close()
    assert dash.total == n
    assert len(dash.stage_samples) == SAMPLE_CALLS and dash.stage_samples["ms"].nunique() == SAMPLE_CALLS
    assert dash.stage_latency.round(6).values.tolist() == [["l0", n, (n - 1) / 2, round(0.95 * (n - 1), 6), (n - 1) / 2]]
    few = load_dashboard(store, InvocationFilter(text="q7"))  # fewer calls than the sample size: all of them
    want = {f"r{i:05d}" for i in range(n) if f"{i:05d}".endswith("7") and i % 3 == 0}
    assert few.total == len(want) and set(few.stage_samples["id"]) == want


def test_short_spans_get_minute_buckets(made):
    dash = load_dashboard(made, InvocationFilter(until=datetime(2024, 3, 1, 10)))
    assert dash.bucket == "minute"
    assert [b.tz_convert("UTC") for b in dash.calls_over_time["bucket"]] == [
        pd.Timestamp("2024-03-01 09:00", tz="UTC"),
        pd.Timestamp("2024-03-01 09:30", tz="UTC"),
    ]


def test_nothing_matches(made):
    dash = load_dashboard(made, InvocationFilter(text="no such words"))
    assert (dash.total, dash.fallbacks, dash.median_latency_ms, dash.fallback_rate, dash.bucket) == (0, 0, None, None, "hour")
    for frame in (
        dash.rows,
        dash.calls_over_time,
        dash.stage_latency,
        dash.stage_samples,
        dash.fallback_over_time,
        dash.top_domains,
        dash.top_keywords,
    ):
        assert frame.empty
    assert list(dash.stage_latency.columns) == ["stage", "calls", "p50_ms", "p95_ms", "mean_ms"]


def test_filter_options(made):
    opts = filter_options(made)
    assert opts.layers == ("L0", "L0+L1", "L1", "none")
    assert opts.domains == ("kubernetes", "security", "storage")
    assert opts.statuses == ("empty", "ok")
    assert opts.session_tags == ("ci", "manual")
    assert (opts.first, opts.last, opts.total) == (datetime(2024, 3, 1, 9, tzinfo=UTC), datetime(2024, 3, 4, 12, tzinfo=UTC), 5)


def test_export_has_every_column_with_json_as_text(made):
    frame = export_frame(made, InvocationFilter(layers=("L0",)))
    assert list(frame.columns) == list(COLUMNS)
    assert list(frame["id"]) == ["b", "d"]
    assert json.loads(frame["retrieval_details"][1])["l0"]["matched_keywords"][0]["term"] == "vault"
    assert json.loads(frame["result"][0]) == {"results": []}
    assert frame["error"][0] == "timed out" and bool(frame["fallback"][1]) is True


# --- rows written by real lookups (L0 only) -----------------------------------------------------------
def test_dashboard_of_real_l0_lookups(tmp_path, base_settings):
    corpus = load_corpus(SAMPLE_CORPUS)
    store = InvocationStore(tmp_path / "invocations.duckdb")
    try:
        services = LookupServices(L0Index(corpus.entries), recorder=store)
        settings = base_settings.with_(l1_enabled=False)
        queries = ["Vault is sealed", "Pod keeps restarting", "something weird is happening to our users", "disk full"]
        results = [lookup_knowledge(q, services, settings.options(), session_tag="dash") for q in queries]
        # no flush here: the dashboard takes what is still in the spool
        dash = load_dashboard(store, InvocationFilter(), top_n=100)
        assert dash.total == 4
        assert list(dash.rows["id"]) == [r.invocation_id for r in reversed(results)]
        assert dash.fallbacks == sum(r.fallback for r in results) == 3  # L0 matched, L1 disabled
        # L1 is off: only the l0 and fuse stages ran, once per call
        assert list(dash.stage_latency["stage"]) == ["l0", "fuse"] and list(dash.stage_latency["calls"]) == [4, 4]
        want = Counter((t.term, t.field) for r in results for t in r.l0.matched_keywords)
        got = {(k, f): n for k, f, n in dash.top_keywords.itertuples(index=False)}
        assert got == dict(want) and want
        domains = Counter(to_record(r).domain for r in results)
        assert dash.unrouted == domains.pop(None, 0)
        assert dict(zip(dash.top_domains["domain"], dash.top_domains["calls"], strict=True)) == dict(domains)
        for i, r in enumerate(reversed(results)):
            details = details_for(store, dash.rows["id"][i])
            assert details["layer"] == r.layer and details["l1"]["status"] == "disabled"
            assert details["l0"] == json.loads(json.dumps(r.l0.to_dict()))
        fallback = load_dashboard(store, InvocationFilter(fallback_only=True, session_tags=("dash",)))
        assert set(fallback.rows["id"]) == {r.invocation_id for r in results if r.l0.has_match}
        opts = filter_options(store)
        assert opts.layers == ("L0", "none") and opts.session_tags == ("dash",)
    finally:
        store.close()


def test_the_page_reads_over_one_connection_and_writes_after_it(tmp_path, monkeypatch):
    """Inside store.reading(), the page's calls share one read-only connection (each open cost 30-60 ms of the
    667 ms page load on 1M rows); a record made meanwhile is flushed by the next read, not lost."""
    import duckdb

    store = InvocationStore(tmp_path / "invocations.duckdb")
    for rec in ROWS[:4]:
        store.record(rec)
    opened: list[bool] = []
    real_connect = duckdb.connect

    def counting(database, read_only=False, config=None):
        opened.append(read_only)
        return real_connect(database, read_only=read_only, config=config or {})

    monkeypatch.setattr(duckdb, "connect", counting)  # the real DuckDB behind it: this only counts the opens
    with store.reading():  # flushes the four rows first (read-write), then holds one read-only connection
        options = filter_options(store)
        dash = load_dashboard(store, InvocationFilter())
        picked = dash.rows["id"].iloc[0]
        assert details_for(store, picked) is not None and result_for(store, picked) is not None
        store.record(ROWS[4])
        assert filter_options(store).total == 4  # no write inside the block: it would wait for its own reader
    assert opened == [False, True]
    assert options.total == dash.total == 4
    assert filter_options(store).total == 5  # outside the block: flushed, and read on a connection of its own
    assert opened == [False, True, False, True]
