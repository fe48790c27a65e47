"""app_support.resources: the context's store is made once per connection, not on every access."""

from __future__ import annotations

import time

from app_support.resources import AppContext, Connection
from retrieval.core.hints import L0Index


def test_the_store_is_built_once_per_connection_and_collection(base_settings, weaviate_client, sample_corpus):
    settings = base_settings.with_(collection="TestSample")
    conn = Connection(weaviate_client, None, "test", time.monotonic())
    l0 = L0Index(sample_corpus.entries)
    ctx = AppContext(settings, sample_corpus, l0, conn, None, None)
    store = ctx.store
    assert store is not None and store.name == "TestSample"
    assert ctx.store is store and ctx.lookup_services(record=False).store is store
    store.fold_factor = 4  # what a search taught it
    rerun = AppContext(settings, sample_corpus, l0, conn, None, None)  # the next run of the page
    assert rerun.store is store and rerun.store.fold_factor == 4
    other = AppContext(settings.with_(collection="TestOther"), sample_corpus, l0, conn, None, None)
    assert other.store is not None and other.store is not store and other.store.name == "TestOther"
    reconnected = Connection(weaviate_client, None, "test", conn.opened_at + 1.0)
    assert AppContext(settings, sample_corpus, l0, reconnected, None, None).store is not store
    offline = AppContext(settings, sample_corpus, l0, Connection(None, "down", "test", time.monotonic()), None, None)
    assert offline.store is None
