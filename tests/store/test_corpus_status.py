"""Per-entry status for the corpus browser, against the real session Weaviate (sample corpus in
'TestSample') and against edited copies of the corpus on disk."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from weaviate.classes.query import Filter

from retrieval.core.chunking import chunk_entry, stored_hash
from retrieval.core.corpus import Corpus, Entry, load_corpus
from retrieval.core.hints import L0Index
from retrieval.store import indexing
from retrieval.store.corpus_status import (
    HEALTH_STATES,
    INDEX_STATES,
    IndexHealth,
    IndexReading,
    corpus_health,
    entry_statuses,
    index_health,
    index_state,
    orphans,
    read_index,
    statuses_frame,
)
from retrieval.store.weaviate_store import KnowledgeStore

from ..conftest import SAMPLE_CORPUS

ENTRY = Entry("db/Lag", "Replica lag", "databases", "The standby falls behind.", ("lag",), ("PostgreSQL",))
HASH = stored_hash(ENTRY)


@pytest.mark.parametrize(
    "state, expected",
    [
        (None, "unknown"),  # L1 unreachable
        ({}, "missing"),
        ({"db/Other": (HASH, 1, 1)}, "missing"),
        ({"db/Lag": (HASH, 3, 3)}, "indexed"),
        ({"db/Lag": (HASH, 2, 3)}, "partial"),
        ({"db/Lag": (HASH, 0, 3)}, "partial"),
        ({"db/Lag": ("0123456789abcdef", 3, 3)}, "stale"),
        ({"db/Lag": ("mixed", 1, 3)}, "stale"),  # chunks of two versions
    ],
)
def test_index_state(state, expected):
    assert index_state(ENTRY, state) == expected
    assert expected in INDEX_STATES


@pytest.mark.parametrize(
    "state, lost, expected",
    [
        ({"db/Lag": (HASH, 3, 3)}, {}, "indexed"),
        ({"db/Lag": (HASH, 3, 3)}, {"db/Other": 2}, "indexed"),
        ({"db/Lag": (HASH, 3, 3)}, {"db/Lag": 1}, "lost"),  # stored whole, the vector index lost a chunk
        ({"db/Lag": (HASH, 2, 3)}, {"db/Lag": 1}, "partial"),
        ({"db/Lag": ("0123456789abcdef", 3, 3)}, {"db/Lag": 3}, "stale"),  # changed anyway: the ingest redoes it
        ({}, {"db/Lag": 1}, "missing"),
        (None, {"db/Lag": 1}, "unknown"),
    ],
)
def test_index_state_with_lost_vectors(state, lost, expected):
    assert index_state(ENTRY, state, lost) == expected


# (entry states, loading, error) -> (health, missing, to_update)
@pytest.mark.parametrize(
    "states, loading, error, expected",
    [
        (["indexed"] * 3, None, None, ("current", 0, 0)),
        ([], None, None, ("current", 0, 0)),
        (["indexed", "stale", "missing"], None, None, ("out_of_date", 0, 2)),
        (["missing"] * 3, None, None, ("not_indexed", 0, 3)),
        (["indexed", "lost", "lost"], None, None, ("needs_repair", 2, 0)),
        (["partial", "indexed", "indexed"], None, None, ("needs_repair", 1, 0)),
        (["lost", "partial", "stale", "missing"], None, None, ("needs_repair", 2, 2)),  # damage wins over changes
        (["lost"] * 3, "loading its shards", None, ("loading", 0, 0)),  # transient: nothing is judged meanwhile
        ([], "loading its shards", None, ("loading", 0, 0)),
        (["unknown"] * 2, None, None, ("unknown", 0, 0)),
        (["indexed"] * 2, None, "WeaviateQueryError: boom", ("unknown", 0, 0)),
        (["indexed"] * 2, "loading", "WeaviateQueryError: boom", ("loading", 0, 0)),
    ],
)
def test_index_health(states, loading, error, expected):
    health = index_health(states, loading=loading, error=error)
    assert (health.state, health.missing, health.to_update) == expected
    assert health.state in HEALTH_STATES and health.entries == len(states)
    assert health.reason == (loading or error)
    d = health.to_dict()
    assert json.loads(json.dumps(d)) == d and d["message"] == health.message


def test_health_messages():
    assert IndexHealth("needs_repair", 48, 24).message.startswith(
        "The index needs repair: 24 of 48 entries are missing (the Weaviate server stopped without saving them)"
    )
    assert IndexHealth("loading", 48, reason="x").message.startswith("Weaviate is loading the index…")
    assert "3 of 48 entries are new or changed" in IndexHealth("out_of_date", 48, 0, 3).message
    assert IndexHealth("current", 48).message == "The index is current: all 48 entries indexed."
    behind = IndexHealth("current", 48, partition_in_step=False)
    assert behind.partition_behind and "per-domain partition is not in step" in behind.message
    assert not IndexHealth("current", 48, partition_in_step=True).partition_behind
    assert not IndexHealth("needs_repair", 48, 2, partition_in_step=False).partition_behind  # the repair says more


@pytest.mark.parametrize(
    "state, expected",
    [
        (None, []),
        ({}, []),
        ({"db/Lag": (HASH, 1, 1)}, []),
        ({"z/Gone": ("h", 1, 1), "db/Lag": (HASH, 1, 1), "a/Gone": ("h", 2, 2)}, ["a/Gone", "z/Gone"]),
    ],
)
def test_orphans(state, expected):
    assert orphans(Corpus("x", (ENTRY,)), state) == expected


def test_the_indexed_sample_corpus(sample_store, sample_corpus, embedder):
    l0 = L0Index(sample_corpus.entries)
    state = sample_store.indexed_state()
    statuses = entry_statuses(
        sample_corpus, l0, tokenizer=embedder.tokenizer, max_tokens=embedder.max_tokens, indexed_state=state
    )
    assert [s.entry_id for s in statuses] == [e.entry_id for e in sample_corpus.entries]
    assert {s.indexed for s in statuses} == {"indexed"}
    assert orphans(sample_corpus, state) == []
    for status, entry in zip(statuses, sample_corpus.entries, strict=True):
        assert status.chunks == state[entry.entry_id][2]  # the same chunking the ingest did
        assert (status.title, status.domain, status.keywords, status.entities) == (
            entry.title,
            entry.domain,
            entry.keywords,
            entry.entities,
        )
        assert status.frontmatter == entry.metadata and status.frontmatter["title"] == entry.title
        assert list(status.index_terms) == l0.index_terms(entry.entry_id) and status.index_terms
    vault = next(s for s in statuses if s.entry_id == "security/VaultSealed")
    assert {"term": "vault", "field": "keyword"}.items() <= next(t for t in vault.index_terms if t["term"] == "vault").items()
    d = vault.to_dict()
    assert json.loads(json.dumps(d)) == d and d["indexed"] == "indexed" and d["keywords"] == list(vault.keywords)


def test_edited_corpus_on_disk(sample_store, tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, root)
    vault = root / "security" / "VaultSealed.md"
    vault.write_text(vault.read_text(encoding="utf-8") + "\n\nAlso check the auto-unseal KMS key.\n", encoding="utf-8")
    (root / "quantum").mkdir()
    (root / "quantum" / "QubitDecoherence.md").write_text(
        "---\ntitle: Qubit decoherence alarm\nkeywords: [qubit decoherence]\n---\nCryostat temperature rose.\n", encoding="utf-8"
    )
    (root / "databases" / "RedisMemoryEvictions.md").unlink()
    corpus = load_corpus(root)
    state = sample_store.indexed_state()
    statuses = {s.entry_id: s for s in entry_statuses(corpus, L0Index(corpus.entries), indexed_state=state)}
    assert statuses["security/VaultSealed"].indexed == "stale"
    assert statuses["quantum/QubitDecoherence"].indexed == "missing"
    assert statuses["quantum/QubitDecoherence"].domain == "quantum"  # from the folder
    assert {s.indexed for k, s in statuses.items() if k not in ("security/VaultSealed", "quantum/QubitDecoherence")} == {
        "indexed"
    }
    assert len(statuses) == 48 and "databases/RedisMemoryEvictions" not in statuses
    assert orphans(corpus, state) == ["databases/RedisMemoryEvictions"]
    assert {s.chunks for s in statuses.values()} == {None}  # no tokenizer given
    assert {s.indexed for s in entry_statuses(corpus, L0Index(corpus.entries), indexed_state=None)} == {"unknown"}


def test_partial_when_a_chunk_is_lost(weaviate_client, embedder, sample_corpus):
    entry = sample_corpus.by_id()["security/VaultSealed"]
    other = sample_corpus.by_id()["storage/InodeExhaustion"]
    corpus = Corpus("partial", (entry, other))
    store = KnowledgeStore(weaviate_client, "TestStatusPartial")
    store.drop()
    try:
        indexing.ingest(store, corpus, embedder)
        chunks = len(chunk_entry(entry, embedder.tokenizer, embedder.max_tokens))
        assert chunks > 1
        store.collection.data.delete_many(
            where=Filter.by_property("entry_id").equal(entry.entry_id) & Filter.by_property("chunk_index").equal(chunks - 1)
        )
        state = store.indexed_state()
        got = {
            s.entry_id: (s.indexed, s.chunks)
            for s in entry_statuses(
                corpus, L0Index(corpus.entries), tokenizer=embedder.tokenizer, max_tokens=embedder.max_tokens, indexed_state=state
            )
        }
        assert got[entry.entry_id] == ("partial", chunks)
        assert got[other.entry_id][0] == "indexed"
        # a changed entry with a chunk missing counts as stale: the next ingest redoes it either way
        changed = replace(entry, text=entry.text + " edited")
        assert index_state(changed, state) == "stale"
    finally:
        store.drop()


def test_statuses_frame(sample_corpus):
    l0 = L0Index(sample_corpus.entries)
    statuses = entry_statuses(sample_corpus, l0, indexed_state={})
    frame = statuses_frame(statuses, top_terms=2)
    assert list(frame.columns) == ["entry_id", "title", "domain", "indexed", "chunks", "index_terms", "keywords", "entities"]
    assert len(frame) == len(sample_corpus.entries)
    row = frame.set_index("entry_id").loc["security/VaultSealed"]
    status = next(s for s in statuses if s.entry_id == "security/VaultSealed")
    assert row["index_terms"] == ", ".join(t["term"] for t in status.index_terms[:2]) and row["index_terms"].count(", ") == 1
    assert row["keywords"] == ", ".join(status.keywords) and row["entities"] == ", ".join(status.entities)
    assert row["indexed"] == "missing"
    empty = statuses_frame([])
    assert empty.empty and list(empty.columns) == list(frame.columns)


def test_read_index_of_a_real_collection(weaviate_client, embedder, sample_corpus):
    """read_index and corpus_health against the real server: current, then one chunk deleted through the API
    (an entry the index lost), then a repair by ingest; a dropped collection is not indexed; no store is unknown."""
    entry = sample_corpus.by_id()["security/VaultSealed"]
    other = sample_corpus.by_id()["storage/InodeExhaustion"]
    corpus = Corpus("health", (entry, other))
    store = KnowledgeStore(weaviate_client, "TestStatusHealth")
    store.drop()
    try:
        assert corpus_health(corpus, read_index(store)).state == "not_indexed"
        indexing.ingest(store, corpus, embedder)
        reading = read_index(store)
        assert (reading.loading, reading.error, reading.lost) == (None, None, {})
        assert corpus_health(corpus, reading).state == "current"
        store.collection.data.delete_many(
            where=Filter.by_property("entry_id").equal(entry.entry_id) & Filter.by_property("chunk_index").equal(0)
        )
        health = corpus_health(corpus, read_index(store))
        assert (health.state, health.missing, health.entries) == ("needs_repair", 1, 2)
        assert "1 of 2 entries are missing" in health.message
        report = indexing.ingest(store, corpus, embedder)
        assert (report.unchanged, report.updated) == (1, 1)
        health = corpus_health(corpus, read_index(store))
        assert (health.state, health.partition_in_step, health.partition_behind) == ("current", True, False)
        store.client.collections.delete(f"{store.name}_ByDomain")  # as an older version left it
        health = corpus_health(corpus, read_index(store))
        assert (health.state, health.partition_in_step, health.partition_behind) == ("current", False, True)
    finally:
        store.drop()
    none = read_index(None, "cannot reach 127.0.0.1:1")
    assert none == IndexReading(None, error="cannot reach 127.0.0.1:1")
    assert corpus_health(corpus, none).state == "unknown"
