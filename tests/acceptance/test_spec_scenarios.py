"""Every scenario of the contract (shared/spec/rag-knowledge-retrieval.md), against a real embedded
Weaviate and a real DuckDB file. Test names follow the spec's scenario titles."""

from __future__ import annotations

import json

import duckdb
import pytest

from retrieval.core.corpus import Corpus, Entry
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.core.search_request import SearchRequest
from retrieval.engine.server import connect
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.store.factory import knowledge_store
from retrieval.types.modes import SearchMode

from ..conftest import free_port

NV = SearchMode.NEAR_VECTOR


@pytest.fixture
def recorder(db_path):
    store = InvocationStore(db_path)
    yield store
    store.close()


@pytest.fixture
def services(sample_corpus, sample_store, embedder, recorder):
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)


@pytest.fixture
def settings(base_settings):
    return base_settings.with_(collection="TestSample", top_k=5)


def stored_details(recorder: InvocationStore, invocation_id: str) -> dict:
    recorder.flush()
    con = duckdb.connect(str(recorder.db_path), read_only=True)
    try:
        layer, raw = con.execute("SELECT layer, retrieval_details FROM tool_invocation WHERE id = ?", [invocation_id]).fetchone()
    finally:
        con.close()
    details = json.loads(raw)
    assert details["layer"] == layer
    return details


# Requirement: Knowledge retrieval SHALL keep L0 as a hint provider
def test_l0_produces_traceable_hint_data(services, settings, sample_corpus):
    result = lookup_knowledge("PostgreSQL replication lag on the standby", services, settings.options())
    hints = result.l0
    assert hints.matched_titles and hints.matched_keywords and hints.domains and hints.entities
    entry = sample_corpus.by_id()[hints.matches[0].entry_id]
    assert entry.entry_id == "databases/PostgresReplicationLag"
    # every hint traces back to a field of a matched entry
    assert hints.matched_titles[0] == entry.title
    assert hints.domains == (entry.domain,)
    assert "PostgreSQL" in hints.entities and "PostgreSQL" in entry.entities
    assert any(t.term in entry.keywords and t.field == "keyword" for t in hints.matched_keywords)
    payload = result.to_dict()["l0"]
    assert {"matched_titles", "matched_keywords", "domains", "entities", "matches"} <= set(payload)


def test_l0_does_not_bypass_semantic_retrieval_by_default(services, settings):
    result = lookup_knowledge("Vault is sealed", services, settings.options())
    assert len(result.l0.matches) == 1  # exactly one L0 match ...
    assert result.l1.status == "ok" and result.l1.candidates  # ... and L1 still ran
    assert result.layer == "L0+L1"
    assert result.results[0].source == "both"


def test_l0_single_match_skips_l1_only_when_disabled_or_unavailable(services, settings, sample_corpus, embedder):
    off = lookup_knowledge("Vault is sealed", services, settings.with_(l1_enabled=False).options())
    assert (off.l1.status, off.layer, off.l1.candidates) == ("disabled", "L0", ())
    gone = LookupServices(L0Index(sample_corpus.entries), embedder, None, None, l1_unavailable="cannot reach it")
    res = lookup_knowledge("Vault is sealed", gone, settings.options())
    assert (res.l1.status, res.layer, res.l1.error) == ("unavailable", "L0", "cannot reach it")
    assert res.results[0].entry_id == "security/VaultSealed"


# Requirement: Knowledge retrieval SHALL use L0 domain as optional L1 filter
def test_single_domain_filter(services, settings, sample_store, embedder):
    query = "Pod keeps restarting"
    result = lookup_knowledge(query, services, settings.options())
    assert result.l0.domains == ("kubernetes",)
    assert result.l1.to_dict()["filter"] == {"category": "kubernetes"}
    assert result.l1.candidates and all(c.domain == "kubernetes" for c in result.l1.candidates)
    # the filter really acts in Weaviate: the same vector, unfiltered and deep enough, reaches other domains
    unfiltered = sample_store.search(SearchRequest(NV, 20, embedder.embed_query(query)))
    assert {c.domain for c in unfiltered} - {"kubernetes"}


def test_ambiguous_domain_fallback_multiple_domains(services, settings):
    result = lookup_knowledge("disk full", services, settings.options())
    assert len(set(result.l0.domains)) > 1
    assert result.l1.category is None and result.l1.to_dict()["filter"] is None
    assert result.l1.status == "ok"
    assert len({c.domain for c in result.l1.candidates}) > 1  # nothing narrowed the search


def test_ambiguous_domain_fallback_zero_domains(services, settings):
    result = lookup_knowledge("something weird is happening to our users", services, settings.options())
    assert result.l0.domains == () and result.l0.matches == ()
    assert result.l1.category is None and result.l1.status == "ok"
    assert result.layer == "L1"
    assert all(r.source == "L1" for r in result.results)


# Requirement: Knowledge retrieval SHALL preserve fallback evidence
def test_l1_has_no_results(sample_corpus, sample_store, embedder, recorder, settings):
    # An entry L0 knows but Weaviate does not hold yet (written after the last ingest): its domain exists
    # only in L0, so the filtered L1 query really returns no candidates.
    fresh = Entry(
        "quantum/QubitDecoherence",
        "Qubit decoherence alarm",
        "quantum",
        "Cryostat temperature rose; qubits lose coherence.",
        ("qubit decoherence",),
        ("cryostat",),
    )
    l0 = L0Index([*sample_corpus.entries, fresh])
    services = LookupServices(l0, embedder, sample_store, recorder)
    result = lookup_knowledge("qubit decoherence in the cryostat", services, settings.options())
    assert result.l1.category == "quantum"
    assert result.l1.status == "empty" and result.l1.candidates == ()
    assert result.layer == "L0"
    assert result.results[0].entry_id == fresh.entry_id and result.results[0].source == "L0"
    assert result.relevance.semantic_support is False
    assert "no semantic support" in result.relevance.reason
    assert stored_details(recorder, result.invocation_id)["l1"]["status"] == "empty"


def test_l1_fails_when_the_server_is_stopped(base_settings, sample_corpus, embedder, recorder, tmp_path):
    # A second real embedded Weaviate, indexed, then stopped before the lookup.
    own = base_settings.with_(
        data_dir=tmp_path / "own",
        embedded_port=free_port(),
        embedded_grpc_port=free_port(),
        collection="Stopped",
        l1_timeout_s=3.0,
    )
    client = connect(own)
    store = knowledge_store(client, own)
    small = Corpus(str(tmp_path), tuple(e for e in sample_corpus.entries if e.domain == "security"))
    indexing.ingest(store, small, embedder)
    services = LookupServices(L0Index(sample_corpus.entries), embedder, store, recorder)
    assert lookup_knowledge("Vault is sealed", services, own.options()).l1.status == "ok"
    client.close()  # stops the embedded server process
    result = lookup_knowledge("Vault is sealed", services, own.options())
    assert result.l1.status == "failed" and result.l1.error
    assert result.layer == "L0"
    assert result.results[0].entry_id == "security/VaultSealed" and result.results[0].source == "L0"
    assert result.relevance.semantic_support is False
    details = stored_details(recorder, result.invocation_id)
    assert details["l0"]["domains"] == ["security"]
    assert details["l0"]["matched_titles"] == list(result.l0.matched_titles)
    assert details["l1"]["error"] == result.l1.error


def test_l1_fails_on_a_dead_port(base_settings, sample_corpus, db_path):
    from retrieval.services import open_runtime

    dead = base_settings.with_(weaviate_url=f"http://127.0.0.1:{free_port()}", l1_timeout_s=2.0, db_path=db_path)
    runtime = open_runtime(dead)
    try:
        assert runtime.services.store is None and "cannot reach" in runtime.services.l1_unavailable
        result = lookup_knowledge("Vault is sealed", runtime.services, dead.options())
    finally:
        runtime.close()
    assert result.l1.status == "unavailable" and result.layer == "L0"
    assert result.results[0].entry_id == "security/VaultSealed"
    store = InvocationStore(db_path)
    row = store.get(result.invocation_id)
    assert row["l1_status"] == "unavailable" and "cannot reach" in row["error"]
    assert row["retrieval_details"]["l0"]["domains"] == ["security"]


# Requirement: Knowledge retrieval SHALL persist L0 hints
def test_retrieval_details_include_l0_hints(services, settings, recorder):
    result = lookup_knowledge("Redis is evicting keys, memory is at maxmemory", services, settings.options())
    details = stored_details(recorder, result.invocation_id)
    l0 = details["l0"]
    assert l0["domains"] == list(result.l0.domains) == ["databases"]
    assert l0["entities"] == list(result.l0.entities) and "Redis" in l0["entities"]
    assert l0["matched_titles"] == list(result.l0.matched_titles) and l0["matched_titles"]
    assert [k["term"] for k in l0["matched_keywords"]] == [k.term for k in result.l0.matched_keywords]
    assert details["timings_ms"]["l0"] >= 0 and "l1" in details["timings_ms"]


def test_a_rule_template_is_searched_as_its_words_and_recorded_as_sent(services, settings, recorder):
    sent = "Replication lag on {{ $labels.instance }} is {{ $value | humanizeDuration }} for PostgreSQL"
    result = lookup_knowledge(sent, services, settings.options())
    plain = lookup_knowledge("Replication lag on instance is for PostgreSQL", services, settings.options())
    assert result.searched == "Replication lag on instance is for PostgreSQL"
    assert [r.entry_id for r in result.results] == [r.entry_id for r in plain.results]
    assert result.results[0].entry_id == "databases/PostgresReplicationLag"
    assert not {"label", "value", "humanizeduration"} & {t.key for t in result.l0.matched_keywords}
    details = stored_details(recorder, result.invocation_id)
    assert details["searched"] == result.searched and recorder.get(result.invocation_id)["input"] == sent
    assert plain.searched == "" and stored_details(recorder, plain.invocation_id)["searched"] == plain.query


def test_retrieval_layer_reflects_cooperating_retrieval(services, settings, recorder):
    result = lookup_knowledge("PostgreSQL replication lag on the standby", services, settings.options())
    assert result.l0.matches and result.l1.candidates
    assert result.layer == "L0+L1"
    assert stored_details(recorder, result.invocation_id)["layer"] == "L0+L1"
    row = recorder.get(result.invocation_id)
    assert row["layer"] == "L0+L1" and row["tool_name"] == "lookup_knowledge" and row["status"] == "ok"
