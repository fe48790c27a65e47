"""The compression bench at a tiny size: one real embedded Weaviate per compression, figures that are numbers,
the collection made with the compression asked for, and the eval sets run in child processes under it."""

from __future__ import annotations

import json

import pytest

from retrieval.bench import compression
from retrieval.config import REPO_ROOT

pytestmark = pytest.mark.slow


def _number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x >= 0


def test_a_tiny_run_gives_every_figure_per_compression(base_settings, embedder):
    result = compression.run([40], ["none", "bq"], settings=base_settings, queries=75, embedder=embedder)
    json.loads(json.dumps(result))  # JSON as --json prints it
    size = result["sizes"]["40"]
    assert size["entries"] == 40 and size["chunks"] > 40 and size["queries"] == 75
    assert list(size["compressions"]) == ["none", "bq"]
    for name, f in size["compressions"].items():
        assert f["collection_compression"] == name  # what the server says the collection holds
        assert f["chunks"] == size["chunks"]
        for key in ("rss_after_ingest_mb", "rss_after_queries_mb"):
            assert _number(f[key]["now_mb"]) and f[key]["peak_mb"] >= f[key]["now_mb"] > 50
        assert 0 < f["filtered_recall"] <= 1 and 0 < f["unfiltered_recall"] <= 1 and f["filtered_recall_queries"] == 75
        assert _number(f["query_p50_ms"]["unfiltered"]) and _number(f["query_p50_ms"]["filtered"])
        assert _number(f["ingest_s"]) and _number(f["data_dir_mb"]) and _number(f["loadavg"]["end"])
    # with 40 entries the HNSW search is exhaustive enough for the uncompressed index to find the exact top 10
    assert size["compressions"]["none"]["unfiltered_recall"] == 1.0
    table = compression.render_table(result)
    assert "| none (none) |" in table and "| bq (bq) |" in table


def test_the_eval_sets_run_under_each_compression(capsys):
    assert compression.main(["--sizes", "0", "--compressions", "sq", "--eval-sets", str(REPO_ROOT / "eval_sets"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["sizes"] == {}
    mrr = result["eval_sets"]["sq"]["mrr@10"]
    assert set(mrr) == {"sample-ops-alerts", "sample-ops-issue-titles", "sample-ops-unanswerable"}
    assert 0.5 < mrr["sample-ops-alerts"] <= 1.0  # the sample set's lookup finds most entries at the top


def test_unknown_compressions_and_sizes_are_refused():
    with pytest.raises(ValueError, match="zstd"):
        compression.run([10], ["zstd"])
    with pytest.raises(ValueError, match="sizes"):
        compression.run([], ["none"])
