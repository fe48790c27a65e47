"""The support fit kept beside a collection, in the real Weaviate of the test session."""

from __future__ import annotations

import pytest

from retrieval.core.corpus import Corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.core.support_norms import Baseline, SupportNorms
from retrieval.errors import ConfigError
from retrieval.store import indexing
from retrieval.store.support_fit import drop_fit, ensure_fit, fit_key, fit_name, read_fit, write_fit

NORMS = SupportNorms((("similarity", Baseline(0.7, 0.01)), ("lexical_per_word", Baseline(1.5, 0.1))), "self", 30, "by hand")


def test_a_written_fit_reads_back_and_is_replaced(store):
    assert read_fit(store) is None
    write_fit(store, NORMS, "key-1", {"probes": 30})
    got = read_fit(store)
    assert got is not None and got.norms == NORMS and got.key == "key-1" and got.figures == {"probes": 30}
    other = SupportNorms(NORMS.baselines, "self", 31, "again")
    write_fit(store, other, "key-2", {})
    assert read_fit(store).norms == other and read_fit(store).key == "key-2"
    drop_fit(store)
    assert read_fit(store) is None and not store.client.collections.exists(fit_name(store))


def test_an_unreadable_fit_names_the_collection(store):
    write_fit(store, NORMS, "k", {})
    handle = store.client.collections.use(fit_name(store))
    uuid = next(iter(handle.iterator())).uuid
    handle.data.update(uuid=uuid, properties={"data": '{"norms": {"baselines": {"similarity": [0.7]}}}'})
    with pytest.raises(ConfigError, match=store.name):
        read_fit(store)


def test_the_key_follows_the_entries_and_the_quality_settings(sample_corpus, base_settings):
    key = fit_key(sample_corpus, base_settings)
    assert key == fit_key(sample_corpus, base_settings.with_(support_threshold=0.9, top_k=7, session_tag="x"))
    assert key != fit_key(sample_corpus, base_settings.with_(vector_weight=3.0))
    assert key != fit_key(Corpus(sample_corpus.root, sample_corpus.entries[1:]), base_settings)


def test_ensure_fit_fits_once_and_again_when_the_corpus_changes(store, embedder, sample_corpus, base_settings):
    corpus = Corpus("mem", sample_corpus.entries[:30])
    indexing.ingest(store, corpus, embedder)
    settings = base_settings.with_(collection=store.name)
    services = LookupServices(l0=L0Index(corpus.entries), embedder=embedder, store=store)
    norms, ran = ensure_fit(store, corpus, services, settings)
    assert ran is not None and norms == ran.norms and norms.kind == "self"
    stored = read_fit(store)
    assert stored.norms == norms and stored.key == fit_key(corpus, settings) and stored.figures["probes"] == ran.probes
    again, ran_again = ensure_fit(store, corpus, services, settings)
    assert ran_again is None and again == norms  # current: nothing probed
    forced, ran_forced = ensure_fit(store, corpus, services, settings, force=True)
    assert ran_forced is not None and forced.fit_id == norms.fit_id  # the same probes give the same fit
    grown = Corpus("mem", sample_corpus.entries[:36])
    indexing.ingest(store, grown, embedder)
    services = LookupServices(l0=L0Index(grown.entries), embedder=embedder, store=store)
    refit, ran_refit = ensure_fit(store, grown, services, settings)
    assert ran_refit is not None and refit.fit_id != norms.fit_id and read_fit(store).key == fit_key(grown, settings)
