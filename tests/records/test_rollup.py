"""The rollups the store keeps at insert time (retrieval.records.rollup), over real DuckDB files: they count every
stored row exactly once (a replayed spool adds nothing), a file from before them is filled in, and the Invocations
page read from them shows the same counts as a scan and quantiles within the histogram's 0.5%."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from retrieval.records.dashboard import InvocationFilter, filter_options, load_dashboard
from retrieval.records.invocations import COLUMNS, SCHEMA, InvocationStore, insert_rows, spool_line, spool_table
from retrieval.records.rollup import BUCKET_RATIO, bucket_of

from ..helpers.records import make_record

START = datetime(2024, 3, 1, 8, 30, tzinfo=UTC)


def records(n: int, *, seed: int = 3) -> list:
    """n rows over about four days, with lognormal latencies and stage timings, some without an embed timing."""
    gen = random.Random(seed)
    out = []
    for i in range(n):
        timings = {"l0": round(gen.lognormvariate(0.0, 0.7), 4), "l1": round(gen.lognormvariate(2.5, 0.4), 4)}
        if i % 3:
            timings["embed"] = round(gen.lognormvariate(1.5, 0.3), 4)
        base = make_record(i)
        out.append(
            replace(
                base,
                created_at=(START + timedelta(seconds=gen.uniform(0, 4 * 86400))).isoformat(),
                latency_ms=round(gen.lognormvariate(3.2, 0.5), 3),
                layer=("L0", "L1", "L0+L1")[i % 3],
                fallback=i % 4 == 0,
                retrieval_details={**base.retrieval_details, "timings_ms": timings},
            )
        )
    return out


def rollup_counts(store: InvocationStore) -> dict[str, int]:
    frame = store.query(
        "SELECT (SELECT count(*) FROM tool_invocation) AS rows, (SELECT sum(calls) FROM invocation_hourly) AS hourly, "
        "(SELECT count(*) FILTER (WHERE fallback) FROM tool_invocation) AS fallback_rows, "
        "(SELECT sum(fallbacks) FROM invocation_hourly) AS hourly_fallbacks, "
        "(SELECT count(embed_ms) FROM tool_invocation) AS embed_rows, "
        "(SELECT sum(calls) FROM invocation_histogram WHERE metric = 'embed') AS embed_hist, "
        "(SELECT sum(calls) FROM invocation_histogram WHERE metric = 'latency') AS latency_hist, "
        "(SELECT count(*) FROM invocation_keyword) AS keyword_rows, "
        "(SELECT coalesce(sum(calls), 0) FROM invocation_keyword_count) AS keyword_counted",
        flush_first=False,
    )
    return {k: int(v) for k, v in frame.iloc[0].items()}


def test_bucket_bounds_hold_their_values():
    for ms in (0.0, 0.0004, 0.001, 0.5, 1.0, 25.3, 4096.0):
        b = bucket_of(ms)
        assert BUCKET_RATIO**b <= max(ms, 0.001) * (1 + 1e-12) and max(ms, 0.001) < BUCKET_RATIO ** (b + 1)


def test_rollups_count_every_row_once_through_replays_and_repeats(db_path):
    store = InvocationStore(db_path)
    recs = records(300)
    for rec in recs:
        store.record(rec)
    store.flush()
    first = rollup_counts(store)
    assert first["rows"] == first["hourly"] == first["latency_hist"] == 300
    assert first["fallback_rows"] == first["hourly_fallbacks"] == 75
    assert first["embed_rows"] == first["embed_hist"] == 200
    assert first["keyword_rows"] == first["keyword_counted"] > 0
    # the same rows again (a replayed spool), with a repeat inside one chunk and two new rows: only those count
    new = records(302, seed=9)[300:]
    again, bad = spool_table([spool_line(r) for r in [*recs[:50], new[0], new[0], *recs[50:], new[1]]])
    assert bad == 0
    assert store.with_connection(lambda con: insert_rows(con, again, max_bytes=again.nbytes // 7), read_only=False) == 2
    second = rollup_counts(store)
    assert second["rows"] == second["hourly"] == second["latency_hist"] == 302
    assert second["embed_rows"] == second["embed_hist"]
    assert second["keyword_rows"] == second["keyword_counted"] > first["keyword_counted"]


def test_a_file_from_before_the_rollups_is_filled_in(db_path):
    recs = records(40)
    with duckdb.connect(str(db_path)) as con:  # the layout of an older store: one table, no rollups
        con.execute(SCHEMA)
        for rec in recs:
            row = rec.to_dict()
            con.execute(
                f"INSERT INTO tool_invocation VALUES ({', '.join('?' for _ in COLUMNS)})",
                [json.dumps(row[c]) if c in ("result", "retrieval_details") else row[c] for c in COLUMNS],
            )
    store = InvocationStore(db_path)
    counts = rollup_counts(store)
    assert counts["rows"] == counts["hourly"] == counts["latency_hist"] == 40
    assert counts["embed_rows"] == counts["embed_hist"] > 0
    assert counts["keyword_rows"] == counts["keyword_counted"] > 0
    InvocationStore(db_path)  # a second open adds nothing
    assert rollup_counts(store) == counts
    # the typed keyword lists are filled in too: a filtered page counts the same keywords as the keyword table
    filtered = load_dashboard(store, InvocationFilter(layers=("L0",))).top_keywords
    scan = store.query(
        "SELECT term AS keyword, field, count(*) AS calls FROM invocation_keyword WHERE invocation_id IN "
        "(SELECT id FROM tool_invocation WHERE layer = 'L0') GROUP BY ALL ORDER BY calls DESC, keyword, field LIMIT 10",
        flush_first=False,
    )
    assert not filtered.empty and list(filtered.itertuples(index=False)) == list(scan.itertuples(index=False))


@pytest.mark.parametrize("bucket", ["hour", "day"])
def test_the_page_from_the_rollups_matches_a_scan(db_path, bucket):
    store = InvocationStore(db_path)
    for rec in records(3000):
        store.record(rec)
    store.flush()
    scanned = load_dashboard(store, InvocationFilter(), bucket=bucket)
    rolled = load_dashboard(store, InvocationFilter(), bucket=bucket, exact_up_to=0)
    assert not scanned.quantiles_approximate and rolled.quantiles_approximate
    assert (
        (rolled.total, rolled.fallbacks, rolled.bucket)
        == (scanned.total, scanned.fallbacks, scanned.bucket)
        == (3000, 750, bucket)
    )
    assert rolled.calls_over_time.equals(scanned.calls_over_time)
    assert rolled.fallback_over_time.equals(scanned.fallback_over_time)
    assert scanned.median_latency_ms is not None and rolled.median_latency_ms is not None
    assert math.isclose(rolled.median_latency_ms, scanned.median_latency_ms, rel_tol=0.01)
    assert list(rolled.stage_latency["stage"]) == list(scanned.stage_latency["stage"]) == ["l0", "embed", "l1"]
    assert list(rolled.stage_latency["calls"]) == list(scanned.stage_latency["calls"]) == [3000, 2000, 3000]
    for (_, r), (_, s) in zip(rolled.stage_latency.iterrows(), scanned.stage_latency.iterrows(), strict=True):
        assert math.isclose(r["mean_ms"], s["mean_ms"], rel_tol=1e-9)  # sums: exact
        for q in ("p50_ms", "p95_ms"):
            assert math.isclose(r[q], s[q], rel_tol=0.01), (r["stage"], q, r[q], s[q])
    # a filter reads the rows themselves: exact again
    assert not load_dashboard(store, InvocationFilter(layers=("L0",)), exact_up_to=0).quantiles_approximate


def test_filter_options_read_from_the_rollup_are_exact(db_path):
    store = InvocationStore(db_path)
    recs = records(120)
    for rec in recs:
        store.record(rec)
    opts = filter_options(store)
    times = sorted(datetime.fromisoformat(r.created_at) for r in recs)
    assert (opts.total, opts.first, opts.last) == (120, times[0], times[-1])
    assert opts.layers == ("L0", "L0+L1", "L1")


def test_top_keywords_over_every_row_come_from_the_rollup_and_match_a_scan(db_path):
    gen = random.Random(5)
    terms = [f"term{n}" for n in range(40)]
    recs = []
    for i in range(900):
        base = make_record(i)
        picked = gen.sample(terms, 3)  # a few terms far more often than others, one of them without a field
        keywords = [{"term": t, "field": gen.choice(["keywords", "title", None]), "weight": 1.0} for t in picked]
        keywords.append({"term": "common", "field": None if i % 2 else "keywords", "weight": 0.5})
        l0 = {**base.retrieval_details["l0"], "matched_keywords": keywords}
        recs.append(replace(base, retrieval_details={**base.retrieval_details, "l0": l0}))
    store = InvocationStore(db_path)
    lines = [spool_line(r) for r in recs]
    table, bad = spool_table(lines + lines[:100])  # a replay of some rows counts nothing twice
    assert bad == 0
    assert store.with_connection(lambda con: insert_rows(con, table, max_bytes=table.nbytes // 9), read_only=False) == 900
    scan = store.query(
        "SELECT term AS keyword, field, count(*) AS calls FROM invocation_keyword "
        "GROUP BY ALL ORDER BY calls DESC, keyword, field LIMIT 15",
        flush_first=False,
    )
    dash = load_dashboard(store, InvocationFilter(), top_n=15)
    assert list(scan.itertuples(index=False)) == list(dash.top_keywords.itertuples(index=False))
    assert dash.top_keywords.iloc[0]["keyword"] == "common" and int(dash.top_keywords["calls"].iloc[0]) == 450
    top_two = dash.top_keywords.head(2)
    assert list(top_two["keyword"]) == ["common", "common"] and top_two["field"].isna().sum() == 1


def test_the_newest_rows_read_through_the_hourly_rollup_are_those_of_a_full_sort(db_path):
    store = InvocationStore(db_path)
    for rec in records(1200, seed=11):
        store.record(rec)
    store.flush()
    for limit in (1, 7, 333, 1199, 1200, 5000):
        dash = load_dashboard(store, InvocationFilter(), row_limit=limit)
        full = store.query("SELECT id FROM tool_invocation ORDER BY created_at DESC, id LIMIT ?", [limit], flush_first=False)
        assert len(dash.rows) == min(limit, 1200)
        assert list(dash.rows["id"]) == list(full["id"]), limit


def test_the_store_writes_small_row_groups(db_path):
    from retrieval.records.schema import ROW_GROUP_ROWS

    store = InvocationStore(db_path)
    table, bad = spool_table([spool_line(r) for r in records(5000, seed=2)])
    assert bad == 0
    store.with_connection(lambda con: insert_rows(con, table), read_only=False)
    with duckdb.connect(str(db_path), read_only=True) as con:
        groups = con.execute(
            "SELECT row_group_id, max(start + count) - min(start) FROM pragma_storage_info('tool_invocation') "
            "WHERE column_name = 'id' GROUP BY ALL"
        ).fetchall()
    assert len(groups) >= 5000 // ROW_GROUP_ROWS and max(rows for _, rows in groups) <= ROW_GROUP_ROWS
