"""The eval side on the sample corpus in the session's real Weaviate: cases looked up unrecorded, binned by the SQL
the traffic side uses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import TrafficError
from retrieval.evals.sets import EvalCase, EvalSet, load_eval_set
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.eval_side import CaseCall, bin_calls, case_calls, eval_feature_counts
from retrieval.traffic.features import FEATURES, NO_ESTIMATE, UNFILTERED, bins_of, names_entry_of

SETS = REPO_ROOT / "eval_sets"


@pytest.fixture(scope="module")
def sample_services(sample_corpus, embedder, sample_store, base_settings):
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    return services, base_settings.with_(collection="TestSample").options()


def _titles() -> EvalSet:
    return load_eval_set(SETS / "sample-ops-issue-titles.yaml")


def test_each_case_carries_what_its_recorded_call_would(sample_services):
    services, options = sample_services
    eval_set = _titles()
    calls = case_calls([eval_set], services, options)
    assert len(calls) == len(eval_set.cases)
    for case, call in zip(eval_set.cases, calls, strict=True):
        result = lookup_knowledge(case.query, services, options)
        assert call.query == result.query and call.domain == result.l1.applied_filter
        assert (call.l0_matched, call.fallback, call.names_entry) == (
            result.l0.has_match,
            result.fallback,
            names_entry_of(result.l0),
        )
        assert call.support == pytest.approx(result.relevance.confidence)
    assert any(c.domain is not None for c in calls) and all(c.support is not None for c in calls)


def test_counts_cover_every_case_in_every_feature(sample_services):
    services, options = sample_services
    sets = [_titles(), load_eval_set(SETS / "sample-ops-unanswerable.yaml")]
    counts = eval_feature_counts(sets, services, options)
    cases = sum(len(s.cases) for s in sets)
    assert set(counts) == set(FEATURES)
    assert {f: sum(bins.values()) for f, bins in counts.items()} == dict.fromkeys(FEATURES, cases)
    for feature in FEATURES:
        if bins_of(feature):
            assert set(counts[feature]) <= set(bins_of(feature)), feature
    assert counts["filtered"].get("yes", 0) == sum(n for d, n in counts["routed_domain"].items() if d != UNFILTERED)
    assert counts["query_form"].get("title-like", 0) > counts["query_form"].get("sentence", 0)  # issue titles


def test_nothing_is_recorded(sample_services, tmp_path):
    services, options = sample_services
    recorder = InvocationStore(tmp_path / "inv.duckdb")
    try:
        eval_feature_counts([_titles()], replace(services, recorder=recorder), options)
        recorder.flush()
        assert recorder.count() == 0
        lookup_knowledge("disk full", replace(services, recorder=recorder), options)  # the store does record a call
        recorder.flush()
        assert recorder.count() == 1
    finally:
        recorder.close()


def test_a_set_of_another_corpus_is_refused_naming_the_file_and_the_corpus(sample_services):
    services, options = sample_services
    other = EvalSet(
        "kubevirt-like",
        "",
        "sets/kubevirt-like.yaml",
        None,
        (EvalCase("a", "VirtAPIDown", {"virt-control-plane/VirtAPIDown": 1}), EvalCase("b", "nothing here", {})),
    )
    with pytest.raises(TrafficError) as err:
        eval_feature_counts([_titles(), other], services, options, corpus="collection TestSample")
    assert "sets/kubevirt-like.yaml" in str(err.value) and "collection TestSample" in str(err.value)
    with pytest.raises(TrafficError, match="no eval set chosen"):
        eval_feature_counts([], services, options)


def test_a_set_of_unanswerable_cases_alone_is_taken(sample_services):
    services, options = sample_services
    only = EvalSet("none", "", "sets/none.yaml", None, (EvalCase("a", "Kafka partitions under-replicated", {}),))
    counts = eval_feature_counts([only], services, options)
    assert sum(counts["query_words"].values()) == 1


def test_bins_of_hand_made_calls():
    calls = [
        CaseCall("disk full", False, None, False, False, None),
        CaseCall("The primary database stopped accepting writes.", True, "databases", True, True, 0.72),
    ]
    counts = bin_calls(calls)
    assert counts["routed_domain"] == {UNFILTERED: 1, "databases": 1}
    assert counts["filtered"] == {"no": 1, "yes": 1}
    assert counts["support"] == {NO_ESTIMATE: 1, "0.7–0.8": 1}
    assert counts["query_form"] == {"title-like": 1, "names an entry": 1}
    assert counts["fallback"] == {"no": 1, "yes": 1} and counts["l0_match"] == {"no": 1, "yes": 1}
