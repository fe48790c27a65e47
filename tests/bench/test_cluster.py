"""A small run of `bench --cluster` (retrieval.bench.cluster): one node and a 3-node cluster side by side.
No timing is asserted; the figures must be there, the files written and the servers gone afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.bench.cluster import run_cluster_bench
from retrieval.engine.parent_death import process_alive

pytestmark = pytest.mark.slow


def test_cluster_bench_smoke(base_settings, tmp_path):
    result = run_cluster_bench(base_settings, nodes=3, size=12, queries=6, out_dir=tmp_path, seed=5)
    single, cluster = result["sides"]["single"], result["sides"]["cluster of 3"]
    assert cluster["settings"] == {"replication_factor": 3, "shards": 3, "consistency": "QUORUM"}
    for side in (single, cluster):
        assert side["lookup"]["queries"] == 6 and side["lookup"]["p50_ms"] > 0
        assert side["ingest"]["chunks_per_s"] > 0
    assert sorted(cluster["node_rss_mb"]) == ["node0", "node1", "node2"] and list(single["node_rss_mb"]) == ["node0"]
    assert set(result["ratios"]) == {
        "lookup_p50_cluster_over_single",
        "lookup_p50_cluster_ONE_over_single",
        "lookup_p50_cluster_QUORUM_over_single",
        "ingest_rate_cluster_over_single",
        "rss_peak_total_cluster_over_single",
    }
    assert result["corpus_vectors"] == "real" and "synthetic" not in Path(result["files"][0]).name
    md, js = (Path(f) for f in result["files"])
    assert "| lookup p50 / p95 ms |" in md.read_text()
    assert json.loads(js.read_text())["entries"] == 12
    assert not [p for side in (single, cluster) for p in side["pids"] if process_alive(p)], "a node outlived the bench"


def test_cluster_bench_synthetic_vectors_at_one_and_quorum(base_settings, tmp_path):
    """`bench --cluster 3 --vectors synthetic`: chunk vectors from bench.vectors, the cluster searched at ONE and
    at QUORUM in the same run, every node's RSS after ingest and after the lookups."""
    result = run_cluster_bench(base_settings, nodes=3, size=50, queries=6, out_dir=tmp_path, seed=7, vectors="synthetic")
    single, cluster = result["sides"]["single"], result["sides"]["cluster of 3"]
    assert result["corpus_vectors"].startswith("SYNTHETIC") and result["ingest_consistency"] == "QUORUM"
    by_level = cluster["lookup_by_consistency"]
    assert list(by_level) == ["ONE", "QUORUM"] and cluster["lookup"] == by_level["QUORUM"]
    for f in (single["lookup"], *by_level.values()):
        assert f["queries"] == 6 and isinstance(f["p50_ms"], float) and 0 < f["p50_ms"] <= f["p95_ms"]
        assert f["l1_status"] == {"ok": 6}, f["l1_status"]  # every lookup really reached Weaviate
    assert "lookup_by_consistency" not in single
    assert single["vector_index"].startswith("hnsw, ") and cluster["vector_index"] == single["vector_index"]
    for side, names in ((single, ["node0"]), (cluster, ["node0", "node1", "node2"])):
        for key in ("node_rss_mb_after_ingest", "node_rss_mb"):
            assert sorted(side[key]) == names
            assert all(v["now_mb"] > 50 and v["peak_mb"] >= v["now_mb"] for v in side[key].values()), side[key]
        total = side["rss_total_mb"]["after_lookups"]["peak_mb"]
        assert total == pytest.approx(sum(v["peak_mb"] for v in side["node_rss_mb"].values()), abs=0.2)
    ratios = result["ratios"]
    assert ratios["lookup_p50_cluster_ONE_over_single"] > 0 and ratios["lookup_p50_cluster_QUORUM_over_single"] > 0
    assert ratios["rss_peak_total_cluster_over_single"] > 1.5  # three full copies against one
    md, js = (Path(f) for f in result["files"])
    assert md.name.endswith("-bench-cluster-3-50-synthetic-vectors.md")
    table = md.read_text()
    assert "| lookup p50 / p95 ms at ONE (p50 over one node) |" in table and "at QUORUM" in table
    assert "| node RSS MB after ingest, peak (now) |" in table
    saved = json.loads(js.read_text())
    assert set(saved["sides"]["cluster of 3"]["lookup_by_consistency"]) == {"ONE", "QUORUM"}
    assert not [p for side in (single, cluster) for p in side["pids"] if process_alive(p)], "a node outlived the bench"


def test_cluster_bench_rejects_an_unknown_vectors_kind(base_settings, tmp_path):
    with pytest.raises(ValueError, match="--vectors 'fake'"):
        run_cluster_bench(base_settings, nodes=3, size=5, queries=1, out_dir=tmp_path, vectors="fake")
