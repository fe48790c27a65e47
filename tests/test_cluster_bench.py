"""A small run of `bench --cluster` (retrieval.bench.cluster): one node and a 3-node cluster side by side.
No timing is asserted; the figures must be there, the files written and the servers gone afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.bench.cluster import run_cluster_bench
from retrieval.store.cluster import process_alive

pytestmark = pytest.mark.slow


def test_cluster_bench_smoke(base_settings, tmp_path):
    result = run_cluster_bench(base_settings, nodes=3, size=12, queries=6, out_dir=tmp_path, seed=5)
    single, cluster = result["sides"]["single"], result["sides"]["cluster of 3"]
    assert cluster["settings"] == {"replication_factor": 3, "shards": 3, "consistency": "QUORUM"}
    for side in (single, cluster):
        assert side["lookup"]["queries"] == 6 and side["lookup"]["p50_ms"] > 0
        assert side["ingest"]["chunks_per_s"] > 0
    assert sorted(cluster["node_rss_mb"]) == ["node0", "node1", "node2"] and list(single["node_rss_mb"]) == ["node0"]
    assert set(result["ratios"]) == {"lookup_p50_cluster_over_single", "ingest_rate_cluster_over_single"}
    md, js = (Path(f) for f in result["files"])
    assert "| lookup p50 / p95 ms |" in md.read_text()
    assert json.loads(js.read_text())["entries"] == 12
    assert not [p for side in (single, cluster) for p in side["pids"] if process_alive(p)], "a node outlived the bench"
