"""Synthetic corpus vectors for the bench: unit length, deterministic for a seed, near their own pair, and a
bench run on them says so. The real model embeds the templates; the run uses the session's real Weaviate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval.bench import synthetic
from retrieval.bench.runner import run_bench
from retrieval.bench.vectors import SyntheticVectors
from retrieval.core.chunking import chunk_entry


@pytest.fixture(scope="module")
def small(embedder):
    return SyntheticVectors(embedder, seed=7, components=["kubelet", "postgres primary"], symptoms=["disk full", "crash loop"])


def test_vectors_are_unit_length_and_deterministic_for_a_seed(embedder, small):
    texts = ["Kubelet disk full on orders-api-north\n## Steps", "Postgres primary crash loop on auth", "no pair here"]
    a = small.embed(texts)
    assert a.shape == (3, embedder.dimensions)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, small.embed(texts))  # same seed, same vectors
    assert np.array_equal(a[1], small.embed(texts[1:2])[0])  # whatever batch a text comes in
    other = SyntheticVectors(embedder, seed=8, components=["kubelet", "postgres primary"], symptoms=["disk full", "crash loop"])
    assert not np.allclose(a, other.embed(texts))
    assert small.embed([]).shape == (0, embedder.dimensions)


def test_a_chunk_is_near_its_own_pair_and_queries_are_real(embedder, small):
    assert small.pair_of("Postgres primary crash loop on auth-api (Postgres primary crash loop auth api)") == (1, 1)
    v = small.embed(["Kubelet disk full on a", "Kubelet disk full on b", "Postgres primary crash loop on a"])
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    q = "postgres primary is in a crash loop"
    assert np.array_equal(small.embed_query(q), embedder.embed_query(q))


def test_every_synthetic_chunk_finds_its_title_pair(embedder):
    vecs = SyntheticVectors(embedder, seed=1)
    entries = synthetic.make_entries(40, seed=3, body=synthetic.SHORT)
    comps = [c for cs in synthetic.DOMAINS.values() for c in cs]
    for e in entries:
        want = (comps.index(e.keywords[0]), synthetic.SYMPTOMS.index(e.keywords[1]))
        assert {vecs.pair_of(c.text) for c in chunk_entry(e, embedder.tokenizer, embedder.max_tokens)} == {want}


@pytest.mark.slow
def test_a_bench_run_on_synthetic_vectors_names_them(base_settings, weaviate_client, embedder, tmp_path):
    result = run_bench(
        base_settings,
        sizes=[30],
        queries=4,
        out_dir=tmp_path,
        client=weaviate_client,
        embedder=embedder,
        invocation_rows=0,
        full_bodies_up_to=0,
        raw_sample_chunks=20,
        seed=5,
        vectors="synthetic",
        app=False,  # the app's memory is measured in test_bench's smoke run (slow)
    )
    assert result["corpus_vectors"].startswith("SYNTHETIC corpus vectors")
    md = tmp_path.glob("*-bench-30-synthetic-vectors.md")
    text = next(md).read_text(encoding="utf-8")
    assert "SYNTHETIC corpus vectors" in text and "acorn" in text and "sweeping" in text
    saved = json.loads(next(tmp_path.glob("*-bench-30-synthetic-vectors.json")).read_text(encoding="utf-8"))
    assert saved["corpus_vectors"] == result["corpus_vectors"]
    assert set(saved["sizes"]["30"]["filter_strategies"]) >= {"acorn", "sweeping"}
    assert saved["goals"]["ingest_over_raw"]["met"] is None
    assert saved["sizes"]["30"]["l1"]["filtered_recall"] == 1.0  # 30 entries: below the cutoff, an exact scan
    # 4 lookups and 4 floor queries: 8 texts, 2 recall queries in each of the first three domains (all hold entries)
    assert saved["sizes"]["30"]["l1"]["filtered_recall_detail"]["queries"] == 2 * 3
    assert saved["ratios"]["reingest_s"] == saved["sizes"]["30"]["ingest"]["reingest"]["seconds"]
    assert saved["goals"]["filtered_recall"]["met"] is True
    with pytest.raises(ValueError, match="real or synthetic"):
        run_bench(base_settings, sizes=[30], client=weaviate_client, embedder=embedder, vectors="fake")


def test_filtered_recall_is_measured_against_the_vectors_ingest_stored(store, embedder):
    """Exact recall when the measuring embedder makes the stored vectors; far from it when it makes others: the
    figure compares the search with the collection's own exact ranking, and can fail."""
    from retrieval.bench.vectors import filtered_recall
    from retrieval.core.corpus import Corpus
    from retrieval.store import indexing

    corpus = Corpus("mem", tuple(synthetic.make_entries(60, seed=4, body=synthetic.SHORT)))
    stored = SyntheticVectors(embedder, seed=1)
    indexing.ingest(store, corpus, stored)
    queries = [embedder.embed_query(q) for q in synthetic.make_queries(list(corpus.entries), 6, seed=2)]
    domains = sorted({e.domain for e in corpus.entries})[:2]
    same = filtered_recall(store, corpus, stored, queries, domains, k=2, per_category=3)
    assert same["filtered_recall"] == 1.0 and same["within_tie"] == 1.0 and same["queries"] == 6
    assert same["settings"] == {"filter_strategy": "acorn", "flat_search_cutoff": 1000}
    assert same["searched"] == "partition"  # the ingest made the per-domain partition; filtered searches use it
    other = filtered_recall(store, corpus, SyntheticVectors(embedder, seed=99, noise=0.5), queries, domains, k=2, per_category=3)
    assert other["filtered_recall"] < 1.0
    assert other["filtered_recall"] <= other["within_tie"] < 1.0  # far off, not near ties
