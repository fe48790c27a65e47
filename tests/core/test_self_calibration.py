"""The label-free support calibration against the real Weaviate of the test session (the sample corpus)."""

from __future__ import annotations

import pytest

from retrieval.core.corpus import Corpus
from retrieval.core.hints import L0Index
from retrieval.core.probes import Probe
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import lookup_pipeline
from retrieval.core.self_calibration import run_probe, self_calibrate
from retrieval.core.support import support_model
from retrieval.errors import LookupLabError
from retrieval.store import indexing

from ..helpers.entries import make_entry


@pytest.fixture(scope="module")
def calibration(sample_store, embedder, sample_corpus, base_settings):
    services = LookupServices(l0=L0Index(sample_corpus.entries), embedder=embedder, store=sample_store)
    settings = base_settings.with_(collection="TestSample")
    return self_calibrate(sample_corpus.entries, services, settings.options(), fitted_on="test"), services, settings


def test_every_probe_runs_with_its_entry_and_without_it(calibration, sample_corpus):
    result, _, _ = calibration
    with_entry = [r for r in result.runs if r.answerable]
    removed = [r for r in result.runs if not r.answerable]
    assert len(with_entry) == len(removed) == result.probes  # the sample corpus's rankings are never empty
    assert {r.probe.entry_id for r in with_entry} == {e.entry_id for e in sample_corpus.entries}
    assert all(r.top_id != r.probe.entry_id and not r.right for r in removed)  # the entry is gone: a sibling is first
    sentences = [r for r in with_entry if r.probe.style == "sentence"]
    assert sum(r.right for r in sentences) / len(sentences) >= 0.9  # its own first sentence finds an entry
    assert result.searches >= result.probes and result.seconds > 0


def test_the_removed_runs_give_the_knowledge_base_s_baselines(calibration):
    result, _, _ = calibration
    norms = result.norms
    assert norms is not None and norms.kind == "self" and norms.fitted_on == "test"
    removed = [r for r in result.runs if not r.answerable and not r.named]
    assert norms.probes == len(removed)
    mean_removed = sum(r.features.similarity for r in removed) / len(removed)
    mean_with = sum(r.features.similarity for r in result.runs if r.answerable) / len(removed)
    typical = sum(r.features.query_length for r in removed) / len(removed)
    assert norms.expected("similarity").at(typical) == pytest.approx(mean_removed, abs=0.01)  # a line through them
    assert mean_with > mean_removed + 0.05  # the right entry is more similar than any sibling


def test_figures_say_how_the_claim_treats_the_probes(calibration):
    result, _, settings = calibration
    model = support_model(settings.embedding_model)
    figures = result.figures(model)
    assert set(figures) == {"title", "sentence", "paragraph", "keywords"}
    for style, row in figures.items():
        assert 0.0 <= row["removed_unsupported"] <= 1.0 and 0.0 <= row["right_supported"] <= 1.0, style
        assert row["mean_similarity_with"] > row["mean_similarity_removed"], style
    assert figures["title"]["right_supported"] == 1.0  # a title names its entry: always supported
    data = result.to_dict(model)
    assert data["fit"] == result.norms.describe() and data["probes"] == result.probes
    assert any(note.startswith("probes per style: ") for note in data["notes"])


def test_a_probe_whose_entry_decided_the_routing_searches_again(calibration):
    _, services, settings = calibration
    pipeline = lookup_pipeline(settings.options())
    # the file name names one entry of one domain: with it the lookup is filtered on that domain, without it not
    pair = run_probe(Probe("databases/PostgresDiskFull", "title", "PostgresDiskFull"), services, settings.options(), pipeline)
    assert pair.with_entry is not None and pair.with_entry.right and pair.with_entry.named
    assert pair.without_entry is not None and pair.without_entry.top_id != "databases/PostgresDiskFull"
    assert pair.searches == 2


def test_too_few_probes_keep_the_reference_baselines(store, embedder, base_settings):
    corpus = Corpus("mem", tuple(make_entry(f"a/E{i}", "a", f"Entry number {i} says something about disks.") for i in range(3)))
    indexing.ingest(store, corpus, embedder)
    services = LookupServices(l0=L0Index(corpus.entries), embedder=embedder, store=store)
    result = self_calibrate(corpus.entries, services, base_settings.with_(collection=store.name).options())
    assert result.norms is None and "the reference baselines stay" in result.notes[0]


def test_without_l1_it_says_so(sample_corpus, base_settings):
    services = LookupServices(l0=L0Index(sample_corpus.entries), l1_unavailable="Weaviate is down")
    with pytest.raises(LookupLabError, match="needs L1: Weaviate is down"):
        self_calibrate(sample_corpus.entries, services, base_settings.options())
