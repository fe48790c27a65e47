"""The bench's model and app figures (retrieval.bench.app), on the real model: a fresh Embedder's load and
query-embedding times, and RSS read from /proc. The real app's memory is measured in test_bench's smoke run.
Only that figures are there and plausible is asserted, never how fast."""

from __future__ import annotations

import os

import pytest

from retrieval.bench import app as bench_app
from retrieval.bench.app import model_figures, probe_queries, rss_mb


def test_probe_queries_are_distinct_and_as_many_as_asked():
    for count in (5, 58, 61, 120):
        texts = probe_queries(count, seed=3)
        assert len(texts) == count and len(set(texts)) == count


def test_a_fresh_embedder_reports_its_load_and_distinct_query_embeddings(embedder):
    probe, fig = model_figures(embedder.name, model_dir=None, queries=probe_queries(51, seed=1))
    assert probe is not embedder  # fresh: loaded here, empty query cache
    assert fig["name"] == embedder.name and fig["load_s"] > 0
    q = fig["query_embed"]
    assert q["queries"] == 50 and q["first_ms"] > 0 and 0 < q["p50_ms"] <= q["p95_ms"]
    with pytest.raises(ValueError, match="distinct"):
        model_figures(embedder.name, model_dir=None, queries=["same", "same"])


def test_rss_of_a_live_process_and_of_none():
    mine = rss_mb(os.getpid())
    assert mine is not None and 50 < mine["now_mb"] <= mine["peak_mb"]
    assert rss_mb(2**22 + 12345) is None  # above the kernel's pid_max: no such process


def test_without_chromium_the_app_figure_says_why(monkeypatch, base_settings, tmp_path):
    monkeypatch.setattr(bench_app, "CHROMIUM", str(tmp_path / "no-chromium"))
    out = bench_app.app_memory(base_settings, None, None, workdir=tmp_path, run_id="00000", log=lambda m: None)
    assert out["rss_mb"] is None and "no-chromium is missing" in out["why"]
