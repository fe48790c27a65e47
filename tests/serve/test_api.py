"""The Python API: `from retrieval import open_lookup`, against the test session's Weaviate, the real model
and a temporary DuckDB file."""

from __future__ import annotations

import threading

import pytest

from retrieval import open_lookup
from retrieval.core.lookup import LookupResult
from retrieval.errors import EntryNotFound, QueryError
from retrieval.records.invocations import InvocationStore
from retrieval.serve.api import MAX_TOP_K, check_top_k, excerpt


@pytest.fixture
def settings(base_settings, sample_store, tmp_path):
    return base_settings.with_(collection=sample_store.name, db_path=tmp_path / "api.duckdb", session_tag="api-test")


def test_open_lookup_answers_records_and_flushes_on_close(settings, embedder):
    with open_lookup(settings, embedder=embedder) as kb:
        first = kb.lookup("Pod is crash looping")
        three = kb.lookup("disk is full on the database volume", top_k=3)
        tagged = kb.lookup("TLS certificate expires", session_tag="notebook")
        assert kb.entry(first.results[0].entry_id).entry_id == first.results[0].entry_id
    assert isinstance(first, LookupResult) and first.l1.status == "ok" and first.layer in ("L0+L1", "L1")
    assert len(first.results) == settings.top_k and len(three.results) == 3
    assert first.relevance.semantic_support
    rows = InvocationStore(settings.db_path).query("SELECT id, session_tag FROM tool_invocation ORDER BY created_at")
    assert list(rows["id"]) == [first.invocation_id, three.invocation_id, tagged.invocation_id]
    assert list(rows["session_tag"]) == ["api-test", "api-test", "notebook"]


def test_one_open_lookup_serves_many_threads(settings, embedder):
    queries = ["disk is full", "pod keeps restarting", "certificate expired", "DNS lookups fail"] * 5
    found: list[str] = []
    with open_lookup(settings, embedder=embedder) as kb:

        def work(q: str) -> None:
            found.append(kb.lookup(q, top_k=2).invocation_id)

        threads = [threading.Thread(target=work, args=(q,)) for q in queries]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(set(found)) == len(queries)
    assert InvocationStore(settings.db_path).count() == len(queries)


@pytest.mark.parametrize(
    "query, top_k, message",
    [
        ("", None, "query is empty"),
        ("x" * 2001, None, "over the 2000 character limit"),
        (5, None, "query must be text, got int"),
        ("disk full", 0, "top_k must be between 1 and 50, got 0"),
        ("disk full", MAX_TOP_K + 1, "top_k must be between 1 and 50, got 51"),
        ("disk full", "2", "top_k must be a whole number"),
        ("disk full", False, "got bool False"),
    ],
)
def test_refused_input_raises_query_error_naming_it_and_records_nothing(settings, embedder, query, top_k, message):
    with open_lookup(settings, embedder=embedder) as kb:
        with pytest.raises(QueryError, match=message):
            kb.lookup(query, top_k=top_k)
        with pytest.raises(EntryNotFound, match="'storage/Nope' is not in the corpus"):
            kb.entry("storage/Nope")
    assert InvocationStore(settings.db_path).count() == 0


@pytest.mark.parametrize(
    "value, ok",
    [
        (None, True),
        (1, True),
        (MAX_TOP_K, True),
        (0, False),
        (-1, False),
        (MAX_TOP_K + 1, False),
        (2.0, False),
        ("3", False),
        (True, False),
    ],
)
def test_check_top_k(value, ok):
    if ok:
        assert check_top_k(value) == value
    else:
        with pytest.raises(QueryError, match="top_k"):
            check_top_k(value)


@pytest.mark.parametrize(
    "text, limit, expected",
    [
        ("# Title\n\n## Meaning\n\nThe disk is full.\n", 50, "The disk is full."),
        ("Intro line.\n```bash\ndf -h\n```\nMore   text here.", 100, "Intro line. df -h More text here."),
        ("one two three four five six", 14, "one two three…"),
        ("abcdefghijklmnopqrstuvwxyz", 10, "abcdefghij…"),
        ("", 10, ""),
    ],
)
def test_excerpt(text, limit, expected):
    assert excerpt(text, limit) == expected


def test_a_long_lived_lookup_reads_a_support_fit_made_after_it_opened(base_settings, store, embedder, sample_corpus, tmp_path):
    from retrieval.core.corpus import Corpus
    from retrieval.serve.api import KnowledgeLookup
    from retrieval.services import open_runtime
    from retrieval.store import indexing
    from retrieval.store.support_fit import ensure_fit

    corpus = Corpus(sample_corpus.root, sample_corpus.entries[:30])
    indexing.ingest(store, corpus, embedder)
    settings = base_settings.with_(collection=store.name, db_path=tmp_path / "api.duckdb")
    runtime = open_runtime(settings, embedder=embedder, record=False)
    kb = KnowledgeLookup(runtime, fit_recheck_s=0.0)
    try:
        before = kb.lookup("Pod is crash looping").relevance.fit
        assert before is not None and before["baselines"]["kind"] == "reference"  # no fit of its own yet
        norms, _ = ensure_fit(store, corpus, runtime.services, settings)  # an ingest elsewhere fits it
        after = kb.lookup("Pod is crash looping").relevance.fit
        assert after is not None and after["baselines"] == norms.describe()
        assert runtime.services.norms == norms  # the runtime holds it now: every lookup over it reads it
    finally:
        runtime.close()
