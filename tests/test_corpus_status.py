"""Per-entry status for the corpus browser, against the real session Weaviate (sample corpus in
'TestSample') and against edited copies of the corpus on disk."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from weaviate.classes.query import Filter

from retrieval.chunking import chunk_entry, stored_hash
from retrieval.corpus import Corpus, Entry, load_corpus
from retrieval.corpus_status import INDEX_STATES, entry_statuses, index_state, orphans, statuses_frame
from retrieval.hints import L0Index
from retrieval.weaviate_store import KnowledgeStore

from .conftest import SAMPLE_CORPUS

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
    for status, entry in zip(statuses, sample_corpus.entries):
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
        store.ingest(corpus, embedder)
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
