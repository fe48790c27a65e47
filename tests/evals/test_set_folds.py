"""Cross-validation that holds out whole sets or corpora: hand-checked choices, figures and marks."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.errors import LookupLabError
from retrieval.evals.set_folds import CaseTable, below_on, check_set_cv, choose, folds_of, hold_out

# Three answerable sets of two corpora and one unanswerable set, two cases each; three points and the current
# settings (the last row). Point 0 is best on "a" and "b", point 1 on "c", point 2 is middling everywhere.
SETS = np.array(["a", "a", "b", "b", "c", "c", "u", "u"])
CORPORA = np.array(["x", "x", "x", "x", "y", "y", "x", "x"])
ANSWERABLE = np.array([True, True, True, True, True, True, False, False])
RR = np.array(
    [
        [1.0, 1.0, 1.0, 0.5, 0.0, 0.5, 0, 0],  # a 1.0, b 0.75, c 0.25
        [0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 0, 0],  # a 0.5, b 0.5, c 1.0
        [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0],  # a 0.75, b 0.5, c 0.5
        [1.0, 0.5, 1.0, 0.5, 0.5, 0.5, 0, 0],  # current: a 0.75, b 0.75, c 0.5
    ]
)
HIT1 = (RR == 1.0).astype(float)
SUPPORTED = np.array(
    [
        [1, 1, 1, 0, 0, 0, 1, 0],
        [1, 0, 0, 0, 1, 1, 0, 0],
        [1, 0, 0, 0, 0, 0, 1, 1],
        [1, 0, 1, 0, 0, 0, 0, 0],
    ],
    dtype=float,
)


def table() -> CaseTable:
    return CaseTable(RR, HIT1, SUPPORTED, HIT1, SETS, CORPORA, ANSWERABLE)


def test_per_set_mrr_and_figures_by_hand():
    t = table()
    names, per_set = t.set_mrr()
    assert names == ["a", "b", "c"]
    assert per_set[0].tolist() == [1.0, 0.75, 0.25]
    # point 0 on b: rr (1, 0.5), first case right and supported: promise 1 of 1
    assert t.figures(0, "b") == {"mrr@10": 0.75, "hit@1": 0.5, "correct_supported_rate": 0.5, "promise": 1.0}
    # the unanswerable set: point 0 claims support for one of its two queries
    assert t.figures(0, "u") == {"mrr@10": None, "hit@1": None, "correct_supported_rate": None, "promise": 0.5}


@pytest.mark.parametrize(
    "columns, rule, tiebreak, expected",
    [
        ([0, 1, 2], "mean", [0, 0, 0], 0),  # means 0.667, 0.667, 0.583: a tie between 0 and 1, the first in grid order
        ([0, 1, 2], "mean", [0, 1, 0], 1),  # the tie goes to the higher tiebreak
        ([0, 1, 2], "mean", [1, 0, 0], 0),
        ([0, 1, 2], "worst", [0, 0, 0], 1),  # worst sets 0.25, 0.5, 0.5: points 1 and 2 tie, 1 comes first
        ([0, 1, 2], "worst", [0, 0, 1], 2),
        ([0, 1], "mean", [0, 0, 0], 0),  # without c, point 0 (0.875) wins
        ([2], "mean", [0, 0, 0], 1),  # c alone: point 1
    ],
)
def test_choose(columns, rule, tiebreak, expected):
    _, per_set = table().set_mrr()
    assert choose(per_set, columns, tiebreak, rule) == expected


def test_the_current_row_is_never_chosen():
    _, per_set = table().set_mrr()
    assert choose(per_set, [0, 1], [0, 0, 0], "mean") == 0  # the current row (0.75, 0.75) would tie; it is not a point


def test_leave_one_set_out_by_hand():
    cv = hold_out(table(), "sets", tiebreak=[0, 0, 0], rule="mean", current=3)
    by_set = {r.set_name: r for r in cv.rows}
    assert set(by_set) == {"a", "b", "c", "u"}
    # a held out: on b, c point 0 has 0.5, point 1 0.75, point 2 0.5 -> 1; its figure on a 0.5
    assert by_set["a"].chosen == 1 and by_set["a"].held_out["mrr@10"] == 0.5 and by_set["a"].trained_on == ("b", "c")
    # b held out: on a, c 0.625, 0.75, 0.625 -> 1; on b 0.5 | c held out: on a, b -> 0; on c 0.25
    assert by_set["b"].chosen == 1 and by_set["b"].held_out["mrr@10"] == 0.5
    assert by_set["c"].chosen == 0 and by_set["c"].held_out["mrr@10"] == 0.25
    # in-sample: the tie between 0 and 1 goes to 0, the first; c's gap is 0.25 - 0.25 = 0, a's 1.0 - 0.5
    assert cv.in_sample_point == 0
    assert by_set["a"].gap == pytest.approx(0.5) and by_set["c"].gap == pytest.approx(0.0)
    # the unanswerable set is scored by the point chosen on every answerable set (0): it claims one of the two
    assert by_set["u"].chosen == 0 and by_set["u"].held_out["promise"] == 0.5 and by_set["u"].gap is None
    assert cv.mean == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    assert cv.worst is not None and cv.worst.set_name == "c"
    # against the current settings (a 0.75, b 0.75, c 0.5): every answerable set loses
    assert [r.set_name for r in cv.rows if r.loses] == ["a", "b", "c"]
    data = cv.to_dict([{"w": 0}, {"w": 1}, {"w": 2}])
    assert data["rows"][0]["chosen"] == {"w": 1} and data["worst_set"] == "c" and data["label"] == "leave one set out"


def test_leave_one_corpus_out_by_hand():
    cv = hold_out(table(), "corpora", tiebreak=[0, 0, 0], rule="mean", current=3)
    rows = {(r.fold, r.set_name): r for r in cv.rows}
    # corpus x held out (a, b, u): trained on c alone -> point 1; corpus y held out: trained on a, b -> point 0
    assert rows[("x", "a")].chosen == 1 and rows[("x", "b")].chosen == 1 and rows[("x", "u")].chosen == 1
    assert rows[("y", "c")].chosen == 0 and rows[("y", "c")].held_out["mrr@10"] == 0.25


def test_folds_without_training_sets_are_left_out():
    t = CaseTable(RR[:, :2], HIT1[:, :2], SUPPORTED[:, :2], HIT1[:, :2], SETS[:2], CORPORA[:2], ANSWERABLE[:2])
    assert folds_of(t, "sets") == []  # one answerable set: nothing to train on when it is held out
    assert [f for f, _, _ in folds_of(table(), "sets")] == ["a", "b", "c", "u"]


def test_refusals_name_what_is_missing():
    with pytest.raises(LookupLabError, match="at least two eval sets with answerable cases"):
        check_set_cv(["a"], [], "sets")
    with pytest.raises(LookupLabError, match="two corpora"):
        check_set_cv(["a", "b"], ["x"], "corpora")
    with pytest.raises(LookupLabError, match="--choose 'best'"):
        choose(np.zeros((2, 2)), [0], [0, 0], "best")
    with pytest.raises(LookupLabError, match="unknown set cross-validation 'styles'"):
        folds_of(table(), "styles")


def test_below_on_names_the_sets_a_point_loses():
    assert below_on(table(), 0, 3) == ["c"]
    assert below_on(table(), 1, 3) == ["a", "b"]
    assert below_on(table(), 3, 3) == []
