"""The traffic view names the style the chosen eval set lacks: three mixes of the shared kubevirt sets' cases, played
as traffic through a real Weaviate, each set beside the alert summaries set."""

from __future__ import annotations

import pytest

from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.errors import TrafficError
from retrieval.evals.sets import EvalSet, load_eval_set
from retrieval.store import indexing
from retrieval.traffic.eval_side import eval_feature_counts
from retrieval.traffic.mix import mix_report

from ..conftest import KUBEVIRT, KUBEVIRT_EVAL, RUNBOOKS_EVAL, SHARED, needs_shared

pytestmark = pytest.mark.slow  # a corpus indexed and some 400 lookups in a real Weaviate

TITLES = SHARED / "eval_sets" / "kubevirt-issue-titles.yaml"
DESCRIPTIONS = SHARED / "eval_sets" / "kubevirt-alert-descriptions.yaml"
# tag -> cases taken (the first n) of the summaries, descriptions and issue titles sets
MIXES = {"mostly-summaries": (60, 5, 5), "mostly-issue-titles": (5, 5, 50), "mixed": (25, 25, 25)}


@pytest.fixture(scope="module")
def kubevirt(weaviate_client, embedder, base_settings):
    from retrieval.store.weaviate_store import KnowledgeStore

    needs_shared(KUBEVIRT, KUBEVIRT_EVAL, TITLES, DESCRIPTIONS)
    corpus = load_corpus(KUBEVIRT)
    store = KnowledgeStore(weaviate_client, "TestKubevirt")
    store.drop()
    indexing.ingest(store, corpus, embedder)
    services = LookupServices(L0Index(corpus.entries), embedder, store)
    sets = [load_eval_set(p) for p in (KUBEVIRT_EVAL, DESCRIPTIONS, TITLES)]
    return services, base_settings.with_(collection="TestKubevirt").options(), sets


def _mix(tag: str, sets: list[EvalSet]) -> EvalSet:
    cases = tuple(case for eval_set, n in zip(sets, MIXES[tag], strict=True) for case in eval_set.cases[:n])
    return EvalSet(tag, "", f"traffic:{tag}", None, cases)


@pytest.fixture(scope="module")
def reports(kubevirt):
    services, options, sets = kubevirt
    chosen = eval_feature_counts([sets[0]], services, options, corpus="collection TestKubevirt")
    out = {}
    for tag in MIXES:
        traffic = eval_feature_counts([_mix(tag, sets)], services, options, corpus="collection TestKubevirt")
        out[tag] = mix_report(traffic, chosen, set_names=[sets[0].name])
    for tag, report in out.items():
        print(f"\n[{tag}] {report.sentence}\n  {report.lacking.sentence if report.lacking else 'lacks no style'}")
        print("  JS: " + ", ".join(f"{m.feature} {m.divergence:.3f}" for m in report.features))
    return out


def _gap(report) -> float:
    return report.lacking.traffic - report.lacking.evals if report.lacking else 0.0


def test_the_issue_titles_mix_is_named_title_like_beside_the_summaries(reports):
    lacking = reports["mostly-issue-titles"].lacking
    assert lacking is not None and (lacking.feature, lacking.bin) == ("query_form", "title-like"), lacking
    assert lacking.traffic - lacking.evals >= 0.15, lacking
    assert "title-like queries" in lacking.sentence and "kubevirt-alert-summaries" in lacking.sentence
    form = {tag: r.feature("query_form").divergence for tag, r in reports.items()}
    assert max(form, key=form.__getitem__) == "mostly-issue-titles", form


def test_the_mixed_traffic_is_named_long_beside_the_summaries(reports):
    """A third of the mix is alert descriptions, longer than any summary: the summaries lack long queries."""
    lacking = reports["mixed"].lacking
    assert lacking is not None and (lacking.feature, lacking.bin) == ("query_words", "21–40 words"), lacking
    assert lacking.traffic - lacking.evals >= 0.08, lacking


def test_the_mostly_summaries_mix_lacks_least(reports):
    gaps = {tag: _gap(r) for tag, r in reports.items()}
    assert min(gaps, key=gaps.__getitem__) == "mostly-summaries", gaps
    words = {tag: r.feature("query_words").divergence for tag, r in reports.items()}
    assert min(words, key=words.__getitem__) == "mostly-summaries", words
    for report in reports.values():
        assert all(0.0 <= m.divergence <= 1.0 for m in report.features)
        assert report.sentence == report.feature(report.largest).sentence


def test_a_set_of_the_other_corpus_is_refused(kubevirt):
    services, options, _ = kubevirt
    needs_shared(RUNBOOKS_EVAL)
    with pytest.raises(TrafficError) as err:
        eval_feature_counts([load_eval_set(RUNBOOKS_EVAL)], services, options, corpus="collection TestKubevirt")
    assert str(RUNBOOKS_EVAL) in str(err.value) and "collection TestKubevirt" in str(err.value)
