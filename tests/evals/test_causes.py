"""Misses by cause over a report's cases: counts per configuration, the table, and two runs' counts in words."""

from __future__ import annotations

import math

import pytest

from retrieval.core.miss_cause import Miss, MissCause
from retrieval.evals.cases import CaseResult, ConfigOutcome
from retrieval.evals.causes import MISSES, answerable_misses, cause_table, compare_causes, counts, counts_of_misses
from retrieval.evals.evaluation import EvalReport
from retrieval.types.modes import L1Status, Layer


def outcome(cause: MissCause | None, rank: int | None = 2) -> ConfigOutcome:
    miss = None if cause is None else Miss(cause, "a/E", rank, signal="bm25" if cause is MissCause.FUSION else None)
    return ConfigOutcome(("a/X",), None, Layer.BOTH, L1Status.OK, False, False, miss=miss, rank=rank)


def case(i: int, **configs: MissCause | None) -> CaseResult:
    return CaseResult(f"c{i}", f"q{i}", {"a/E": 1}, None, (), None, {c: outcome(v) for c, v in configs.items()})


CASES = (
    case(1, lookup=MissCause.FUSION, bm25=MissCause.FUSION),
    case(2, lookup=MissCause.FUSION, bm25=MissCause.PAST_DEPTH),
    case(3, lookup=None, bm25=MissCause.FILTER),
    case(4, lookup=MissCause.ANSWERED_UNANSWERABLE, bm25=None),
)


def report() -> EvalReport:
    return EvalReport("s", "t", "now", {}, ("bm25", "lookup"), {}, {}, {}, {}, {}, CASES, [])


def test_counts_per_configuration_in_the_order_of_the_causes():
    assert counts(CASES, "lookup") == {"lost_in_fusion": 2, "answered_unanswerable": 1}
    assert list(counts(CASES, "bm25")) == ["kept_out_by_filter", "past_depth", "lost_in_fusion"]
    assert counts(CASES, "hybrid") == {}


def test_the_table_has_a_row_per_cause_any_configuration_has_and_the_answerable_misses_last():
    rows = cause_table(report())
    assert [r["cause"] for r in rows] == [
        MissCause.FILTER.label,
        MissCause.PAST_DEPTH.label,
        MissCause.FUSION.label,
        MissCause.ANSWERED_UNANSWERABLE.label,
        MISSES,
    ]
    assert rows[-1] == {"cause": MISSES, "bm25": 3, "lookup": 2}  # the unanswerable case answered is not a miss
    assert rows[2] == {"cause": MissCause.FUSION.label, "bm25": 1, "lookup": 2}
    assert answerable_misses({"lost_in_fusion": 4, "answered_unanswerable": 9}) == 4


def test_the_report_json_carries_the_counts_and_each_case_its_miss():
    data = report().to_dict()
    assert data["causes"]["lookup"] == {"lost_in_fusion": 2, "answered_unanswerable": 1}
    miss = data["cases"][0]["configs"]["lookup"]["miss"]
    assert miss["cause"] == "lost_in_fusion" and miss["signal"] == "bm25" and miss["label"] == MissCause.FUSION.label
    back = CaseResult.from_dict(data["cases"][0])
    assert back.configs["lookup"].miss == CASES[0].configs["lookup"].miss
    assert CaseResult.from_dict(data["cases"][2]).configs["lookup"].miss is None


@pytest.mark.parametrize(
    ("before", "after", "said"),
    [
        (
            {"lost_in_fusion": 5},
            {"lost_in_fusion": 2, "kept_out_by_filter": 2},
            ["2 more kept out by the filter", "3 fewer in the lists, lost in the fusion"],
        ),
        ({"past_depth": 1}, {"past_depth": 1}, []),
        ({}, {"not_in_kb": 1}, ["1 more expected id not in the knowledge base"]),
    ],
)
def test_two_runs_causes_compared_in_words(before, after, said):
    assert compare_causes(before, after) == said


def test_a_saved_runs_miss_column_is_counted_and_old_rows_without_one_are_left_out():
    column = [{"cause": "lost_in_fusion"}, None, math.nan, {"cause": "lost_in_fusion"}, {"cause": "past_depth"}]
    assert counts_of_misses(column) == {"past_depth": 1, "lost_in_fusion": 2}
