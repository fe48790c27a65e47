"""The benchmark: the synthetic knowledge bases it builds, and a tiny smoke run through the real embedded
Weaviate of the test session. No timing is asserted: benchmarks are not timed tests."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from retrieval.bench import synthetic
from retrieval.bench.runner import MemoryGuard, _server_rss_mb, grouped_bare, memory_stop, run_bench
from retrieval.core.search_request import SearchRequest
from retrieval.core.text import content_tokens
from retrieval.errors import BenchStopped
from retrieval.types.modes import SearchMode


def test_entries_have_realistic_frontmatter_and_bodies():
    entries = synthetic.make_entries(400, seed=3, body=synthetic.FULL)
    assert len({e.entry_id for e in entries}) == 400
    assert len({e.domain for e in entries}) == 20
    assert all(3 <= len(e.keywords) <= 10 for e in entries)
    assert all(1 <= len(e.entities) <= 3 for e in entries)
    words = [len(e.text.split()) for e in entries]
    assert min(words) >= 200 and max(words) <= 800 + 40  # the last sentence may run over
    short = synthetic.make_entries(50, seed=3, body=synthetic.SHORT)
    assert all(40 <= len(e.text.split()) <= 80 + 40 for e in short)


def test_entries_are_reproducible_and_service_names_carry_no_digits():
    a, b = synthetic.make_entries(30, seed=9), synthetic.make_entries(30, seed=9)
    assert [e.content_hash for e in a] == [e.content_hash for e in b]
    assert synthetic.make_entries(30, seed=10)[0].content_hash != a[0].content_hash
    # Service names are in every title: a number there would be an L0 pattern that any number in a query hits.
    names = [synthetic.service_name(i) for i in (0, 3839, 3840, 100_000, 10**6)]
    assert len(set(names)) == len(names)
    assert not any(t.isdigit() for name in names for t in content_tokens(name))


def test_queries_are_distinct_and_avoid_excluded_ones():
    entries = synthetic.make_entries(200, seed=1)
    first = synthetic.make_queries(entries, 60, seed=5)
    assert len(set(first)) == 60
    again = synthetic.make_queries(entries, 60, seed=5, exclude=set(first))
    assert not set(first) & set(again)


@pytest.mark.slow
def test_smoke_run_prints_every_ratio_and_writes_the_result_files(base_settings, weaviate_client, embedder, tmp_path):
    result = run_bench(
        base_settings,
        sizes=[40, 200],
        queries=8,
        out_dir=tmp_path,
        client=weaviate_client,
        embedder=embedder,
        invocation_rows=3000,
        full_bodies_up_to=40,
        raw_sample_chunks=60,
        seed=11,
        quiet_max_s=10.0,
        app_entries=60,
    )
    assert set(result["ratios"]) == {"l0_p50_growth", "lookup_over_floor", "filtered_over_unfiltered", "record_ms", "reingest_s"}
    for name, value in result["ratios"].items():
        assert isinstance(value, (int, float)) and math.isfinite(value), name
    assert set(result["sizes"]) == {"40", "200"}
    paired = result["l0_paired"]  # L0 of both sizes timed side by side: the growth goal's figures
    assert paired["sizes"] == [40, 200] and paired["queries"] == 8 and paired["passes"] >= 1
    assert result["ratios"]["l0_p50_growth"] == round(paired["big_p50_ms"] / paired["small_p50_ms"], 3)
    for fig in result["sizes"].values():  # the embedded server was watched until quiet before any timing
        assert fig["server_quiet"]["cpu_share"] is not None and fig["server_quiet"]["quiet"] is not None
    assert result["sizes"]["40"]["body_words"] == "200-800" and result["sizes"]["200"]["body_words"] == "40-80"
    for fig in result["sizes"].values():
        assert fig["ingest"]["reingest"]["chunks_embedded"] == 0  # nothing re-embedded: a property, not a timing
        # the floors, measured on the same chunks: every chunk inserted again bare, the model's ways on a sample
        assert fig["ingest"]["floor"]["objects"] == fig["ingest"]["chunks"] and fig["ingest"]["floor"]["objects_per_s"] > 0
        assert fig["ingest"]["embed_floor"]["chunks_per_s"] == max(fig["ingest"]["embed_floor"]["ways"].values()) > 0
        assert fig["ingest"]["over_floor"] > 0 and fig["ingest"]["embed_over_floor"] > 0
        assert set(fig["lookup"]["stages_p50_ms"]) == {"l0", "embed", "l1", "fuse", "record"}
        assert isinstance(fig["weaviate_disk_mb"], float)  # the server's data directory grew by the size's collection
    assert result["invocation_store"]["rows"] == 3000 and result["invocation_store"]["query_ms"]["all rows"]
    traffic = result["invocation_store"]["traffic_warm_ms"]  # the Traffic page's reads, beside the dashboard's
    assert set(traffic) == set(result["invocation_store"]["call_ms"]) and result["invocation_store"]["traffic_peak_rss_mb"] > 0
    assert result["goals"]["traffic_warm_max_ms"]["value"] == max(traffic.values())
    assert result["machine"]["cores"] >= 1 and result["peak_rss_mb"] > 0
    # the model and the app: figures present and plausible (no timing is asserted)
    assert result["embedding_model"] == embedder.name and result["model_load_s"] > 0
    assert result["query_embed_queries"] >= 50 and 0 < result["query_embed_p50_ms"] <= result["query_embed_p95_ms"]
    app = result["app"]
    assert app["rss_mb"] is not None, app.get("why")
    assert result["app_rss_mb"] == app["rss_mb"] > 50 and app["peak_mb"] >= app["rss_mb"]
    assert app["recorded"] == 1  # the app process itself ran and recorded the lookup
    assert not Path(f"/proc/{app['pid']}").exists()  # and was stopped
    assert {"model_load_s", "app_rss_mb", "app_first_page_s", "app_warm_page_max_s"} <= set(result["goals"])
    # the CLI: lookups against a standing server, measured against start-up with imports plus an in-process lookup
    cli_fig = result["cli_lookup"]
    assert cli_fig["warm_s"] is not None, cli_fig.get("why")
    assert 0 < cli_fig["python_s"] < cli_fig["startup_s"] and cli_fig["in_process_ms"] > 0 and cli_fig["cold_s"] > 0
    assert cli_fig["over_in_process"] == round(cli_fig["warm_s"] / (cli_fig["startup_s"] + cli_fig["in_process_ms"] / 1000), 3)
    assert result["goals"]["cli_warm_lookup_s"]["value"] == cli_fig["warm_s"]
    # the app's pages: each opened twice, the first page of the walked app and of a cold embedded start
    assert app["entries"] == 60 and app["first_page"]["s"] > 0
    assert set(app["pages"]) == {"Lookup from a URL", "Invocations", "Runs", "Sweep", "Evaluate", "Filter comparison", "Corpus"}
    assert all(p["first_s"] > 0 and p["warm_s"] > 0 and p["loadavg"] >= 0 for p in app["pages"].values())
    cold = app["cold_first_page"]
    assert cold["s"] is not None, cold.get("why")
    assert cold["s"] > 0 and cold["l1_connected_s"] >= cold["s"] and cold["server_start_s"] > 0
    assert result["goals"]["app_first_page_s"]["value"] == cold["s"]
    assert result["goals"]["app_warm_page_max_s"]["value"] == max(p["warm_s"] for p in app["pages"].values())
    md = sorted(tmp_path.glob("*-bench-40-200.md"))
    js = sorted(tmp_path.glob("*-bench-40-200.json"))
    assert len(md) == 1 and len(js) == 1
    table = md[0].read_text(encoding="utf-8")
    assert "| goal |" in table and "| model_load_s |" in table and "| app_rss_mb |" in table
    assert "L0 of 40 and 200 entries timed side by side" in table
    assert f"| app RSS MB after one lookup (streamlit run app.py, query typed in chromium) | {app['rss_mb']} " in table
    assert "| first page after the server's start, embedded Weaviate starting cold | " in table
    assert "| Invocations | " in table and "| app_warm_page_max_s |" in table
    assert "| Weaviate disk MB for this size (collection and partition), per 100k entries | " in table
    assert "a standing server running (`server start`) | " in table and "| cli_over_in_process |" in table
    saved = json.loads(js[0].read_text(encoding="utf-8"))
    assert {"machine", "sizes", "ratios", "model_load_s", "query_embed_p50_ms", "app_rss_mb"} <= set(saved)
    assert not [n for n in weaviate_client.collections.list_all() if n.startswith("Bench_")]  # dropped afterwards


MEASURED = {
    1000: {"weaviate_rss_mb": {"now_mb": 400.0}, "ingest": {"chunks": 6000}, "body_words": "200-800", "chunks_per_entry": 6.0},
    100000: {"weaviate_rss_mb": {"now_mb": 4500.0}, "ingest": {"chunks": 480000}, "body_words": "40-80", "chunks_per_entry": 4.8},
}


@pytest.mark.parametrize(
    ("n", "memory_gib", "stops"),
    [
        (200_000, 23.5, False),  # 4.5 GB + 480k more chunks at 9.2 KB: about 9 GB
        (1_000_000, 23.5, True),  # about 46 GB, past 80% of 23.5 GiB
        (1_000_000, 64.0, False),  # fits a bigger machine
    ],
)
def test_a_size_that_cannot_fit_is_not_run_and_the_bench_says_why(n, memory_gib, stops):
    got = memory_stop(n, MEASURED, {"now_mb": 150.0}, memory_gib, "40-80")
    assert (got is not None) is stops
    if got:
        assert got["projected_weaviate_mb"] > got["limit_mb"] == round(0.8 * memory_gib * 1024)
        assert f"{n:,} entries stop here" in got["why"] and "9.2 KB per chunk measured up to 100,000 entries" in got["why"]


def test_nothing_measured_yet_stops_nothing():
    assert memory_stop(1_000_000, {}, {"now_mb": 150.0}, 23.5, "40-80") is None


def test_a_small_size_alone_projects_nothing():
    # 1,000 entries' 6,000 chunks: Weaviate's fixed costs would read as 70 KB a chunk and refuse 100,000 entries
    small = {1000: MEASURED[1000]}
    assert memory_stop(100_000, small, {"now_mb": 150.0}, 23.5, "40-80") is None
    assert (
        memory_stop(
            100_000, small | {1000: {**MEASURED[1000], "weaviate_rss_mb": {"now_mb": 9000.0}}}, {"now_mb": 150.0}, 23.5, "40-80"
        )
        is None
    )


def test_the_ingest_guard_stops_a_size_whose_server_outgrows_the_memory_share():
    MemoryGuard(os.getpid(), 10**7).check(100_000, 5_000)  # this process as the server, far under the limit
    MemoryGuard(None, 1.0).check(100_000, 5_000)  # no server on this machine: nothing to watch
    with pytest.raises(BenchStopped, match=r"1,000,000 entries stopped during the ingest: after 64,000 of them Weaviate held"):
        MemoryGuard(os.getpid(), 1.0).check(1_000_000, 64_000)


def test_the_ingest_guard_projects_the_growth_of_the_size_once_a_tenth_is_in():
    rss = (_server_rss_mb(os.getpid()) or {})["now_mb"]
    guard = MemoryGuard(os.getpid(), rss + 200.0)  # room for 200 MB more
    guard.start()
    ballast = bytearray(60 * 2**20)  # this process grows by 60 MB (touched, so resident)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    guard.check(1_000_000, 50_000)  # 5% in: too early to carry the growth on
    with pytest.raises(BenchStopped, match=r"after 200,000 of them .* all of them would need about"):
        guard.check(1_000_000, 200_000)  # 60 MB for a fifth: about 300 MB for all, over the 200 left
    guard.check(1_000_000, 900_000)  # the same growth nearly all in: it fits
    del ballast


def test_grouped_bare_asks_weaviate_for_the_entries_the_lookups_vector_query_finds(sample_store, sample_corpus, embedder):
    vector = list(map(float, embedder.embed_query("pods keep restarting after every deploy")))
    k, entries = 5, len(sample_corpus.entries)
    found = sample_store.search(SearchRequest(SearchMode.NEAR_VECTOR, k, vector, entries=entries))  # sets the fold factor
    bare = grouped_bare(sample_store, vector, k)
    assert len(found) == k
    assert list(bare.groups) == [c.entry_id for c in found]  # the same entries, in the same order
    for c in found:  # each entry's best chunk, with nothing but its distance returned
        best = bare.groups[c.entry_id].objects[0]
        assert best.properties == {} and math.isclose(best.metadata.distance, c.distance, abs_tol=1e-6)
