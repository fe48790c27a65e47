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

from .test_invocations import make_record

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
        "(SELECT sum(calls) FROM invocation_histogram WHERE metric = 'latency') AS latency_hist",
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
    # the same rows again (a replayed spool), with a repeat inside one chunk and two new rows: only those count
    new = records(302, seed=9)[300:]
    again, bad = spool_table([spool_line(r) for r in [*recs[:50], new[0], new[0], *recs[50:], new[1]]])
    assert bad == 0
    assert store.with_connection(lambda con: insert_rows(con, again, max_bytes=again.nbytes // 7), read_only=False) == 2
    second = rollup_counts(store)
    assert second["rows"] == second["hourly"] == second["latency_hist"] == 302
    assert second["embed_rows"] == second["embed_hist"]


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
    InvocationStore(db_path)  # a second open adds nothing
    assert rollup_counts(store) == counts


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
