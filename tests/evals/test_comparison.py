"""Filtered against unfiltered L1, on the real session Weaviate holding the sample corpus ('TestSample')."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.core.routing import category_filter, describe_routing
from retrieval.core.search_request import SearchRequest
from retrieval.evals.comparison import CaseFilterDelta, compare_filter, compare_filter_on_set, reciprocal_rank
from retrieval.evals.sets import load_eval_set
from retrieval.types.modes import SearchMode

from ..conftest import SAMPLE_CORPUS

ALERTS = SAMPLE_CORPUS.parent / "eval_sets" / "sample-ops-alerts.yaml"


@pytest.fixture
def services(sample_corpus, sample_store, embedder):
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)


@pytest.fixture
def settings(base_settings):
    return base_settings.with_(collection="TestSample", top_k=5)


def ids(candidates) -> list[str]:
    return [c.entry_id for c in candidates]


def test_single_domain_query_is_filtered(services, settings, sample_store, embedder, sample_corpus):
    # k = 10 is more than the 8 kubernetes entries: the unfiltered list must reach other domains
    settings = settings.with_(top_k=10)
    cmp = compare_filter("Pod keeps restarting", services, settings)
    assert (cmp.l0_domains, cmp.category) == (("kubernetes",), "kubernetes")
    assert cmp.routing == describe_routing(["kubernetes"])
    kubernetes = {e.entry_id for e in sample_corpus.entries if e.domain == "kubernetes"}
    assert ids(cmp.filtered) and set(ids(cmp.filtered)) <= kubernetes
    assert {c.domain for c in cmp.filtered} == {"kubernetes"}
    assert len(cmp.unfiltered) == 10 and {c.domain for c in cmp.unfiltered} - {"kubernetes"}
    # the two lists are what Weaviate returns for the query, with and without the category filter
    vector = embedder.embed_query("Pod keeps restarting")
    assert ids(cmp.unfiltered) == ids(sample_store.search(SearchRequest(SearchMode.NEAR_VECTOR, 10, vector)))
    assert ids(cmp.filtered) == ids(sample_store.search(SearchRequest(SearchMode.NEAR_VECTOR, 10, vector, category="kubernetes")))
    # the lookup's own vector query fetches deeper for its fusion; its head is the same list
    assert ids(cmp.filtered) == ids(lookup_knowledge("Pod keeps restarting", services, settings.options()).l1.candidates)[:10]
    # overlap / removed / let_in partition the two lists
    f, u = ids(cmp.filtered), ids(cmp.unfiltered)
    assert cmp.overlap == [i for i in u if i in f] and cmp.removed == [i for i in u if i not in f]
    assert sorted(cmp.overlap + cmp.removed) == sorted(u) and sorted(cmp.overlap + cmp.let_in) == sorted(f)
    # a kubernetes entry in the unfiltered top-k ranks at least as high among kubernetes entries alone
    assert cmp.removed == [c.entry_id for c in cmp.unfiltered if c.domain != "kubernetes"]
    assert not set(cmp.let_in) & set(u)
    # rank shifts cover the union, unfiltered order first, with the ranks of each list
    shifts = cmp.rank_shifts()
    assert [s["entry_id"] for s in shifts] == u + cmp.let_in
    for s in shifts:
        assert s["rank_unfiltered"] == (u.index(s["entry_id"]) + 1 if s["entry_id"] in u else None)
        assert s["rank_filtered"] == (f.index(s["entry_id"]) + 1 if s["entry_id"] in f else None)
        assert s["distance"] is not None and 0 <= s["distance"] <= 2
    assert any(s["rank_filtered"] is None for s in shifts)


def test_multi_domain_query_is_not_filtered(services, settings):
    cmp = compare_filter("disk full", services, settings)
    assert len(set(cmp.l0_domains)) > 1 and cmp.category is None
    assert "L1 unfiltered" in cmp.routing
    assert cmp.filtered == cmp.unfiltered and len(cmp.unfiltered) == settings.top_k
    assert len({c.domain for c in cmp.unfiltered}) > 1
    assert (cmp.overlap, cmp.removed, cmp.let_in) == (ids(cmp.unfiltered), [], [])
    assert [(s["rank_unfiltered"], s["rank_filtered"]) for s in cmp.rank_shifts()] == [(i, i) for i in range(1, 6)]


def test_zero_domain_query_is_not_filtered(services, settings):
    cmp = compare_filter("something weird is happening to our users", services, settings)
    assert (cmp.l0_domains, cmp.category) == ((), None)
    assert cmp.filtered == cmp.unfiltered and cmp.removed == cmp.let_in == []


@pytest.mark.parametrize(
    "ranking, expected, rr",
    [
        ([], {"a": 1}, 0.0),
        (["a", "b"], {}, 0.0),
        (["a", "b", "c"], {"a": 1}, 1.0),
        (["x", "a", "b"], {"a": 1, "b": 1}, 0.5),
        (["x", "y", "z", "b"], {"a": 1, "b": 2}, 0.25),
        (["a", "b", "c"], {"a": 0, "c": 3}, 1 / 3),  # grade 0 is not relevant
        (["x", "y"], {"a": 1}, 0.0),
    ],
)
def test_reciprocal_rank(ranking, expected, rr):
    assert reciprocal_rank(ranking, expected) == pytest.approx(rr)


@pytest.mark.parametrize(
    "category, rr_u, rr_f, verdict",
    [
        (None, 0.0, 1.0, "not applied"),  # rr values cannot matter when the filter did not apply
        (None, 0.5, 0.5, "not applied"),
        ("kubernetes", 0.5, 1.0, "helped"),
        ("kubernetes", 0.0, 0.2, "helped"),
        ("kubernetes", 1.0, 0.0, "hurt"),
        ("kubernetes", 0.5, 1 / 3, "hurt"),
        ("kubernetes", 0.5, 0.5, "no change"),
        ("kubernetes", 0.0, 0.0, "no change"),
    ],
)
def test_case_filter_delta_verdict(category, rr_u, rr_f, verdict):
    delta = CaseFilterDelta("c1", "q", "kubernetes", category, rr_u, rr_f)
    assert delta.verdict == verdict
    d = delta.to_dict()
    assert d["verdict"] == verdict and d["delta_rr"] == pytest.approx(rr_f - rr_u)
    assert (d["case_id"], d["category"], d["expected_domain"]) == ("c1", category, "kubernetes")


def test_compare_filter_on_the_sample_alerts(services, settings, tmp_path):
    eval_set = load_eval_set(ALERTS)
    answerable = [c for c in eval_set.cases if c.answerable]
    # one case without a right answer, which must be left out
    extra = tmp_path / "mixed.yaml"
    extra.write_text(
        ALERTS.read_text(encoding="utf-8") + "  - id: NoAnswer\n    query: Kafka partitions under-replicated\n    expected: []\n",
        encoding="utf-8",
    )
    mixed = load_eval_set(extra)
    assert len(mixed.cases) == len(answerable) + 1
    calls = []
    deltas = compare_filter_on_set(mixed, services, settings, progress=lambda done, total: calls.append((done, total)))
    assert [d.case_id for d in deltas] == [c.id for c in answerable]
    assert calls == [(i, len(answerable)) for i in range(1, len(answerable) + 1)]
    counts = Counter(d.verdict for d in deltas)
    assert set(counts) <= {"helped", "hurt", "no change", "not applied"}
    assert sum(counts.values()) == len(answerable) == 48
    assert counts["not applied"] < len(answerable)  # most alert cases name one domain
    for d, case in zip(deltas, answerable, strict=True):
        assert (d.query, d.expected_domain) == (case.query, case.domain)
        assert d.category == category_filter(services.l0.match(case.query).domains)
        assert d.rr_unfiltered in {0.0} | {1 / r for r in range(1, 11)}  # over the top 10, as mrr@10
        assert d.rr_filtered in {0.0} | {1 / r for r in range(1, 11)}
        if d.category is None:
            assert d.rr_filtered == d.rr_unfiltered
    # spot check one case against its own comparison
    case = eval_set.case("PodCrashLoopBackOff")
    one = compare_filter(case.query, services, settings)
    d = next(x for x in deltas if x.case_id == case.id)
    assert (d.rr_unfiltered, d.rr_filtered) == (
        reciprocal_rank(ids(one.unfiltered), case.expected),
        reciprocal_rank(ids(one.filtered), case.expected),
    )
    assert d.category == "kubernetes" and d.rr_filtered == 1.0


def test_excluded_by_filter_lists_the_unfiltered_hits_outside_the_category(services, settings):
    from retrieval.evals.comparison import excluded_by_filter

    settings = settings.with_(top_k=10)  # more than the 8 kubernetes entries: some hits must be elsewhere
    cmp = compare_filter("Pod keeps restarting", services, settings)
    out = excluded_by_filter("Pod keeps restarting", cmp.category, services, settings)
    assert out and all(c.domain != "kubernetes" for _, c in out)
    unfiltered = ids(cmp.unfiltered)
    assert [(rank, c.entry_id) for rank, c in out] == [(i, e) for i, e in enumerate(unfiltered, 1) if e in cmp.removed]
    assert excluded_by_filter("Pod keeps restarting", None, services, settings) == []  # no filter: nothing kept out


@pytest.mark.parametrize("kind", ["bm25", "hybrid"])
def test_each_l1_query_kind_is_compared_as_weaviate_returns_it(kind, services, settings, sample_store, embedder):
    query = "Pod keeps restarting"
    cmp = compare_filter(query, services, settings, kind)
    assert cmp.kind == kind and cmp.category == "kubernetes"
    vector = embedder.embed_query(query)
    request = SearchRequest(SearchMode(kind), 5, vector, text=query, alpha=settings.hybrid_alpha)
    assert ids(cmp.unfiltered) == ids(sample_store.search(request))
    assert ids(cmp.filtered) == ids(sample_store.search(replace(request, category="kubernetes")))
    assert {c.domain for c in cmp.filtered} == {"kubernetes"}


def test_fusion_compares_the_lookups_own_l1_ranking(services, settings):
    """fusion: the filtered side is the lookup's ranking when L0 carries no weight (the default)."""
    query = "Pod keeps restarting"
    assert settings.l0_weight == 0
    cmp = compare_filter(query, services, settings, "fusion")
    looked_up = lookup_knowledge(query, services, settings.options())
    assert looked_up.l1.category == cmp.category == "kubernetes"
    assert ids(cmp.filtered) == [r.entry_id for r in looked_up.results]
    assert [round(c.score, 6) for c in cmp.filtered] == [round(r.score, 6) for r in looked_up.results]
    assert len(cmp.unfiltered) == 5


def test_an_unknown_query_kind_is_refused_by_name(services, settings):
    from retrieval.errors import QueryError

    with pytest.raises(QueryError, match="'cosine'"):
        compare_filter("Pod keeps restarting", services, settings, "cosine")


def test_set_comparison_runs_the_chosen_query_kind(services, settings):
    eval_set = load_eval_set(ALERTS)
    vector_deltas = compare_filter_on_set(eval_set, services, settings)
    bm25_deltas = compare_filter_on_set(eval_set, services, settings, kind="bm25")
    assert [d.case_id for d in vector_deltas] == [d.case_id for d in bm25_deltas]
    first = next(c for c in eval_set.cases if c.answerable)
    cmp = compare_filter(first.query, services, settings.with_(top_k=10), "bm25")
    assert bm25_deltas[0].rr_unfiltered == reciprocal_rank(ids(cmp.unfiltered), first.expected)
