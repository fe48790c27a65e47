"""Why not this entry? explain_entry against the session's real Weaviate and embedding model (the sample corpus):
the trace's ranks are the lookup's, its verdict names the stage that lost the entry, and it records nothing."""

from __future__ import annotations

import json

import pytest

from retrieval.core.explain import EntryTrace, explain_entry, field_hits
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge, search_text
from retrieval.core.miss_cause import MissCause
from retrieval.core.protocols import LookupServices
from retrieval.errors import EntryNotFound
from retrieval.records.invocations import InvocationStore
from retrieval.types.options import LookupOptions

# Queries of eval_sets/ and what the lookup (fusion, top_k 5, the default weights) makes of their expected entry
FIRST = ("Vault sealed after the pod restarted, secrets unavailable for all apps.", "security/VaultSealed")
FILTERED = ("someone pushed an aws key to the public github repo", "security/SecretLeakedInRepository")  # L0: databases
LOST_BM25 = ('Writes fail with "no space left on device" but df -h still shows 40% free.', "storage/InodeExhaustion")
LOST_VECTOR = ("grafana panels went blank for one service, scrape says connection refused", "observability/PrometheusTargetDown")
UNFILTERED = "Disk full on the app server, /var has no space left."


@pytest.fixture(scope="module")
def services(sample_corpus, sample_store, embedder) -> LookupServices:
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)


@pytest.fixture(scope="module")
def options(base_settings) -> LookupOptions:
    return base_settings.with_(collection="TestSample", top_k=5, candidate_depth=15, search_mode="fusion").options()


def ranks_in_lookup(query: str, services: LookupServices, options: LookupOptions) -> dict[str, int]:
    """Every result's rank in the lookup at top_k 15 (the candidate depth is 15 either way, so its ranking is the same)."""
    result = lookup_knowledge(query, services, options, top_k=options.candidate_depth)
    return {r.entry_id: i + 1 for i, r in enumerate(result.results)}


@pytest.mark.parametrize("query", [FIRST[0], FILTERED[0], LOST_BM25[0], UNFILTERED])
def test_the_traces_fused_rank_and_score_are_the_lookups(query, services, options):
    result = lookup_knowledge(query, services, options, top_k=options.candidate_depth)
    assert len(result.results) > options.top_k  # a filtered query ranks its domain's 8 entries; others 15
    for rank, item in enumerate(result.results, start=1):
        trace = explain_entry(query, item.entry_id, services, options)
        assert trace.rank == rank, item.entry_id
        assert trace.fusion.score == pytest.approx(item.score)
        assert trace.fusion.top == result.results[0].entry_id
        assert (trace.miss is None) == (rank == 1)
        if item.source != "L0":  # an L1-found entry's fused score is its parts summed, plus being named
            parts = sum(p.value for p in trace.fusion.parts) + trace.fusion.named_weight * trace.fusion.named
            assert parts == pytest.approx(item.score)


def test_the_entry_ranked_first_gets_no_miss(services, options):
    query, entry = FIRST
    trace = explain_entry(query, entry, services, options)
    assert trace.rank == 1 and trace.miss is None
    assert trace.verdict == f"first: {entry} is the top result"
    assert trace.fusion.top == entry and trace.fusion.gaps()["vector"] == 0.0
    assert trace.l0.rank == 1 and trace.l0.matched and trace.l0.score is not None
    hints = services.l0.match(search_text(query))
    assert trace.l0.score == pytest.approx(next(m.score for m in hints.matches if m.entry_id == entry))
    assert {"vault", "sealed"} <= set(dict(trace.bm25.field_hits if trace.bm25 else ())["heading"])


def test_an_entry_kept_out_by_the_filter_names_both_domains(services, options):
    query, entry = FILTERED
    trace = explain_entry(query, entry, services, options)
    assert (trace.route, trace.domain, trace.domains) == ("databases", "security", ("databases",))
    assert trace.miss is not None and trace.miss.cause is MissCause.FILTER
    assert "L0 chose databases, the entry is in security" in trace.verdict
    assert entry not in ranks_in_lookup(query, services, options)
    assert trace.rank is None and trace.verdict.startswith("not ranked, outside the top 5")
    assert trace.vector is not None and trace.vector.filtered is not None
    assert trace.vector.filtered.rank is None and trace.vector.in_lookup is None  # the filter's lists cannot hold it
    assert trace.vector.unfiltered.rank == 1
    assert f"unfiltered, its vector rank would be {trace.vector.unfiltered.rank}" in trace.verdict
    filtered = lookup_knowledge(query, services, options)
    assert filtered.l1.applied_filter == "databases"
    assert all(c.domain == "databases" for c in filtered.l1.candidates)


@pytest.mark.parametrize(("case", "signal"), [(LOST_BM25, "bm25"), (LOST_VECTOR, "vector")])
def test_lost_in_the_fusion_names_the_signal_with_the_largest_gap(case, signal, services, options):
    query, entry = case
    trace = explain_entry(query, entry, services, options)
    result = lookup_knowledge(query, services, options)
    assert trace.rank == [r.entry_id for r in result.results].index(entry) + 1 == 2
    assert trace.miss is not None and trace.miss.cause is MissCause.FUSION and trace.miss.signal == signal
    assert trace.miss.top == result.results[0].entry_id == trace.fusion.top
    gaps = trace.fusion.gaps()
    weighted = [p.signal for p in trace.fusion.top_parts if p.weight > 0] + ["named"] * (trace.fusion.named_weight > 0)
    assert max(weighted, key=gaps.__getitem__) == signal and gaps[signal] > 0
    assert trace.verdict == f"rank 2, in the top 5: {trace.miss.detail}"
    assert trace.fusion.score is not None and trace.fusion.top_score is not None
    assert trace.fusion.score < trace.fusion.top_score


def test_an_entry_in_neither_list_is_past_their_depth(services, options):
    result = lookup_knowledge(UNFILTERED, services, options)
    in_lists = {c.entry_id for c in result.l1.candidates} | {c.entry_id for c in result.l1.lexical}
    assert result.l1.applied_filter is None and len(result.l1.candidates) == options.candidate_depth
    entry = next(e for e in sorted(services.l0.entries) if e not in in_lists and e not in {m.entry_id for m in result.l0.matches})
    trace = explain_entry(UNFILTERED, entry, services, options)
    assert trace.miss is not None and trace.miss.cause is MissCause.PAST_DEPTH
    assert trace.rank is None and trace.fusion.score is None
    assert trace.vector is not None and trace.vector.in_lookup is None and trace.vector.filtered is None
    assert trace.vector.unfiltered.rank is not None and trace.vector.unfiltered.rank > options.candidate_depth
    assert f"past the lists' depth ({options.candidate_depth}): vector rank {trace.vector.unfiltered.rank}" in trace.verdict
    assert all(p.counted != "own" for p in trace.fusion.parts[:2])


def test_the_lists_ranks_in_the_lookup_are_its_candidates(services, options):
    query, entry = LOST_BM25
    result = lookup_knowledge(query, services, options)
    trace = explain_entry(query, entry, services, options)
    assert trace.vector is not None and trace.bm25 is not None
    assert trace.vector.in_lookup == [c.entry_id for c in result.l1.candidates].index(entry) + 1
    assert trace.bm25.in_lookup == [c.entry_id for c in result.l1.lexical].index(entry) + 1
    assert trace.vector.depth == trace.bm25.depth == options.candidate_depth
    assert trace.vector.unfiltered.rank == trace.vector.in_lookup  # unfiltered: the deeper list starts as the lookup's
    assert trace.bm25.unfiltered.rank == trace.bm25.in_lookup
    assert trace.vector.similarity == pytest.approx(next(c.similarity for c in result.l1.candidates if c.entry_id == entry))


def test_without_l1_the_trace_is_l0s(services, options):
    query, entry = FIRST
    off = options.with_(l1_enabled=False)
    trace = explain_entry(query, entry, services, off)
    assert trace.l1_status == "disabled" and trace.vector is None and trace.bm25 is None
    result = lookup_knowledge(query, services, off)
    assert trace.rank == [r.entry_id for r in result.results].index(entry) + 1


def test_an_unknown_id_raises_entry_not_found_naming_a_close_id(services, options):
    with pytest.raises(EntryNotFound, match=r"did you mean security/VaultSealed") as caught:
        explain_entry(FIRST[0], "VaultSealed", services, options)
    assert caught.value.entry_id == "VaultSealed" and caught.value.close[0] == "security/VaultSealed"
    with pytest.raises(EntryNotFound, match="48 entries"):
        explain_entry(FIRST[0], "security/VaultSeald", services, options)


def test_explain_records_nothing(sample_corpus, sample_store, embedder, db_path, options):
    recorder = InvocationStore(db_path)
    try:
        services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
        lookup_knowledge(FIRST[0], services, options)  # the recorder records a lookup
        recorder.flush()
        before = recorder.count()
        assert before == 1
        explain_entry(LOST_BM25[0], LOST_BM25[1], services, options)
        explain_entry(FILTERED[0], FILTERED[1], services, options)
        recorder.flush()
        assert recorder.count() == before
    finally:
        recorder.close()


def test_a_trace_goes_through_json(services, options):
    query, entry = FILTERED
    trace = explain_entry(query, entry, services, options)
    data = json.loads(json.dumps(trace.to_dict()))
    assert data == trace.to_dict()
    assert (data["entry_id"], data["rank"], data["verdict"]) == (entry, None, trace.verdict)
    assert data["cause"]["cause"] == "kept_out_by_filter" and data["routing"]["filter"] == "databases"
    assert data["vector"]["unfiltered"]["rank"] == 1 and data["vector"]["filtered"]["rank"] is None
    assert [p["signal"] for p in data["fusion"]["parts"]] == ["vector", "bm25", "l0"]
    assert isinstance(trace, EntryTrace)


def test_field_hits_are_the_querys_words_each_field_holds(sample_corpus):
    entry = sample_corpus.by_id()["security/VaultSealed"]
    hits = dict(field_hits("Vault sealed and the secrets are unavailable", entry))
    assert hits["heading"][:2] == ("vault", "sealed")
    assert "the" not in {w for words in hits.values() for w in words}  # stopwords left out
    assert field_hits("zebra quartz", entry) == ()
