"""Judgment coverage: hand-counted cases, then real eval runs of the sample sets over the sample corpus in the
session's Weaviate (a curated set, the same set declared complete, the unanswerable set, a set judged from calls)."""

from __future__ import annotations

import pytest

from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.evals.cases import CaseResult, ConfigOutcome
from retrieval.evals.coverage import COVERAGE_KEY, Coverage, coverage_figures, coverage_of, traffic_sentence
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.types.modes import L1Status, Layer

SETS = REPO_ROOT / "eval_sets"


def case(case_id: str, expected: dict[str, int], ranking: list[str], **more) -> CaseResult:
    outcome = ConfigOutcome(tuple(ranking), None, Layer.BOTH, L1Status.OK, False, True)
    return CaseResult(case_id, f"query {case_id}", expected, None, (), None, {"lookup": outcome}, **more)


def test_coverage_counts_the_results_a_case_judges():
    cases = [
        case("listed", {"a": 1}, ["a", "b", "c", "d"]),  # a judged
        case("graded", {"a": 2, "b": 0}, ["b", "c", "a"]),  # b (grade 0) and a judged
        case("marked", {"a": 1}, ["c", "a", "d"], not_relevant=("c",)),  # c and a judged
        case("none", {}, ["a", "b"]),  # no right answer: every entry is judged not relevant
        case("complete", {"a": 1}, ["x", "y"], complete=True),
    ]
    cov = coverage_of(cases, "lookup")
    assert (cov.judged, cov.results) == (1 + 2 + 2 + 2 + 2, 4 + 3 + 3 + 2 + 2)
    assert cov.share == pytest.approx(9 / 14)
    assert cases[0].unjudged("lookup", 10) == ["b", "c", "d"]
    assert cases[2].unjudged("lookup", 10) == ["d"]
    assert coverage_of(cases[:2], "lookup", k=1) == Coverage(2, 2)  # a, then b (judged at grade 0)
    assert coverage_of(cases[:1], "lookup", k=3) == Coverage(1, 3)
    assert coverage_of(cases, "bm25").share is None  # a configuration that did not run: nothing to judge


def test_a_set_from_recorded_calls_says_how_much_of_it_was_judged():
    cases = [
        case("c1", {"a": 1}, ["a", "b"], invocation="inv-1", not_relevant=("b",)),
        case("c2", {"a": 1}, ["a", "b", "c", "d"], invocation="inv-2"),
        case("typed", {"a": 1}, ["z", "y"]),
    ]
    figures = coverage_figures(cases, ["lookup"], judged="listed", in_judgments_folder=True)
    assert figures["configs"]["lookup"] == {"judged": 3, "results": 8, "share": 0.375}
    assert figures["traffic"]["from_calls"] == 2 and (figures["traffic"]["judged"], figures["traffic"]["results"]) == (3, 6)
    assert traffic_sentence(figures) == (
        "2 of its 3 cases were judged from recorded calls; judgment coverage 50% of their top-10 "
        "(3 of 6 results judged under lookup)."
    )
    typed = coverage_figures(cases[2:], ["lookup"], judged="listed", in_judgments_folder=True)
    assert traffic_sentence(typed).startswith("A set judged in the app: none of its 1 cases names a recorded call")
    curated = coverage_figures(cases[2:], ["lookup"], judged="listed", in_judgments_folder=False)
    assert "traffic" not in curated and traffic_sentence(curated) is None


@pytest.fixture(scope="module")
def sample_services(sample_corpus, sample_store, embedder):
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)


def run(path, sample_corpus, sample_services, base_settings, **settings):
    eval_set = load_eval_set(path, known_ids=[e.entry_id for e in sample_corpus.entries])
    return run_eval(
        eval_set, sample_services, base_settings.with_(collection="TestSample", **settings), configs=["bm25", "lookup"]
    )


def test_a_real_run_reports_coverage_per_configuration(sample_corpus, sample_services, base_settings, tmp_path):
    report = run(SETS / "sample-ops-alerts.yaml", sample_corpus, sample_services, base_settings)
    for config in report.configs:
        ranked = [(c.expected, c.configs[config].ranking[:10]) for c in report.cases]
        judged = sum(1 for expected, top in ranked for e in top if e in expected)
        results = sum(len(top) for _, top in ranked)
        assert report.coverage["configs"][config] == {"judged": judged, "results": results, "share": round(judged / results, 4)}
        assert report.metrics_table()[report.configs.index(config)][COVERAGE_KEY] == round(judged / results, 4)
    assert report.coverage["judged"] == "listed" and "traffic" not in report.coverage
    assert 0 < report.coverage["configs"]["lookup"]["share"] < 0.5  # one expected entry per case, ten results each
    data = report.to_dict()
    first = data["cases"][0]
    assert len(first["unjudged"]["lookup"]) == len(first["configs"]["lookup"]["ranking"][:10]) - (
        first["configs"]["lookup"]["rank"] is not None
    )

    complete = tmp_path / "complete.yaml"
    complete.write_text(
        "judged: complete\n"
        + (SETS / "sample-ops-alerts.yaml").read_text().replace("../sample_corpus", str(SETS.parent / "sample_corpus"))
    )
    declared = run(complete, sample_corpus, sample_services, base_settings)
    assert declared.coverage["configs"]["lookup"]["share"] == 1.0 and declared.coverage["judged"] == "complete"
    assert declared.metrics == report.metrics  # the declaration changes what is judged, not the scores

    unanswerable = run(SETS / "sample-ops-unanswerable.yaml", sample_corpus, sample_services, base_settings)
    assert unanswerable.coverage["configs"]["lookup"]["share"] == 1.0  # no entry answers: every result is judged
    print(
        f"\njudged@10 lookup: sample-ops-alerts {report.coverage['configs']['lookup']}, "
        f"declared complete {declared.coverage['configs']['lookup']}, unanswerable {unanswerable.coverage['configs']['lookup']}"
    )


def test_a_set_judged_from_calls_in_the_judgments_folder(sample_corpus, sample_services, base_settings, tmp_path):
    """Two cases judged from recorded calls, one marking the other shown results not relevant; one typed in Lookup."""
    folder = tmp_path / "judged"
    folder.mkdir()
    alerts = load_eval_set(SETS / "sample-ops-alerts.yaml")
    first = run(SETS / "sample-ops-alerts.yaml", sample_corpus, sample_services, base_settings)
    shown = [e for e in first.cases[0].configs["lookup"].ranking[:5] if e not in first.cases[0].expected]
    path = folder / "judged-sample.yaml"
    path.write_text(
        f"name: judged-sample\ncorpus: {SETS.parent / 'sample_corpus'}\ncases:\n"
        f"  - id: one\n    query: {alerts.cases[0].query}\n    expected: {list(alerts.cases[0].expected)}\n"
        f"    not_relevant: {shown}\n    invocation: inv-1\n"
        f"  - id: two\n    query: {alerts.cases[1].query}\n    expected: {list(alerts.cases[1].expected)}\n"
        "    invocation: inv-2\n"
        f"  - id: three\n    query: {alerts.cases[2].query}\n    expected: {list(alerts.cases[2].expected)}\n"
    )
    report = run(path, sample_corpus, sample_services, base_settings, judgments_dir=folder)
    traffic = report.coverage["traffic"]
    assert (traffic["cases"], traffic["from_calls"], traffic["config"]) == (3, 2, "lookup")
    by_id = {c.id: c for c in report.cases}
    judged = sum(1 for cid in ("one", "two") for e in by_id[cid].configs["lookup"].ranking[:10] if by_id[cid].judged(e))
    assert traffic["judged"] == judged and judged >= len(shown) + 1
    assert not set(shown) & set(by_id["one"].unjudged("lookup", 10))
    assert traffic_sentence(report.coverage).startswith("2 of its 3 cases were judged from recorded calls")
    elsewhere = run(path, sample_corpus, sample_services, base_settings)  # not the judgments folder: the calls still say it
    assert elsewhere.coverage["traffic"]["from_calls"] == 2
