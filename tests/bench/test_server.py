"""The MCP server part of the bench: a small run through the test session's Weaviate, two real serve processes
(HTTP and stdio) and the real model. No timing is asserted: benchmarks are not timed tests."""

from __future__ import annotations

import json
import math

import pytest

from retrieval.bench.server import run_server_bench


@pytest.mark.slow
def test_server_bench_prints_the_added_p50_and_calls_per_second(base_settings, weaviate_client, embedder, tmp_path):
    result = run_server_bench(
        base_settings, out_dir=tmp_path, repeats=1, clients=2, max_queries=12, client=weaviate_client, embedder=embedder
    )
    for transport in ("http", "stdio"):
        fig = result[transport]
        assert fig["calls"] == 12 and fig["exit_code"] == 0
        for key in ("direct_p50_ms", "served_p50_ms", "added_p50_ms", "paired_added_p50_ms"):
            assert math.isfinite(fig[key]), (transport, key)
        assert result["goals"][f"{transport}_server_added_p50_ms"]["value"] == fig["added_p50_ms"]
    assert result["http"]["throughput"]["calls"] == 24 and result["http"]["throughput"]["calls_per_s"] > 0
    assert result["http"]["sdk_client_p50_ms"] > 0
    assert "server added p50 ms" in result["table"] and "calls per second" in result["table"]
    start = result["startup"]  # a cold stdio start: initialize first, then the first lookup once loaded
    assert 0 < start["initialize_ms"] < start["first_lookup_s"] * 1000 and start["exit_code"] == 0 and start["exit_s"] > 0
    assert result["goals"]["stdio_initialize_ms"]["value"] == start["initialize_ms"] and start["sdk_initialize_ms"] > 0
    assert "initialize_ms" in result["table"] and "first_lookup_s" in result["table"]
    md, js = sorted(tmp_path.glob("*-bench-server.md")), sorted(tmp_path.glob("*-bench-server.json"))
    assert len(md) == 1 and len(js) == 1
    assert json.loads(js[0].read_text(encoding="utf-8"))["http"]["added_p50_ms"] == result["http"]["added_p50_ms"]
    assert not [n for n in weaviate_client.collections.list_all() if n.startswith("Bench_server_")]  # dropped afterwards
