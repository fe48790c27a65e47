"""The sweep grid, stratified folds, cross-validation and the paired test: tables and hand-checked cases."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from retrieval.config import EVAL_SETTINGS
from retrieval.errors import ConfigError, LookupLabError
from retrieval.evals.tuning import SWEEPABLE, cross_validate, paired_test, parse_grid, stratified_folds


@pytest.mark.parametrize(
    "text, axes",
    [
        ("vector_weight=0.5,1;l0_weight=0", {"vector_weight": [0.5, 1.0], "l0_weight": [0.0]}),
        (
            "search_mode=near_vector,hybrid;l0_weight=0,0.1,0.2",
            {"search_mode": ["near_vector", "hybrid"], "l0_weight": [0, 0.1, 0.2]},
        ),
        (" top_k = 5, 30 ", {"top_k": [5, 30]}),
        ("mode=fusion;alpha=0.25,0.75", {"search_mode": ["fusion"], "hybrid_alpha": [0.25, 0.75]}),
        ("support=0.3,0.5;", {"support_threshold": [0.3, 0.5]}),
        ("model=bge-small-en-v1.5,ALL-MINILM-L6-V2", {"embedding_model": ["bge-small-en-v1.5", "all-MiniLM-L6-v2"]}),
        ("lexical_weight=0,1", {"lexical_weight": [0.0, 1.0]}),
    ],
)
def test_parse_grid_reads_every_sweepable_setting(text, axes):
    grid = parse_grid(text)
    assert grid.to_dict() == axes
    assert len(grid.points()) == math.prod(len(v) for v in axes.values())


def test_the_sweepable_settings_are_the_eval_settings_with_their_field_types():
    # The sweep re-ranks signals it fetched once (lab/sweep.py case_figures): a setting that joins these must be
    # applied there before a grid may vary it. Then add it here.
    assert {
        "embedding_model": str,
        "search_mode": str,
        "hybrid_alpha": float,
        "top_k": int,
        "candidate_depth": int,
        "vector_weight": float,
        "lexical_weight": float,
        "l0_weight": float,
        "name_weight": float,
        "missing_score": str,
        "support_threshold": float,
    } == SWEEPABLE
    assert tuple(SWEEPABLE) == EVAL_SETTINGS


def test_grid_points_are_every_combination_in_order():
    assert parse_grid("search_mode=near_vector,hybrid;l0_weight=0,0.1").points() == [
        {"search_mode": "near_vector", "l0_weight": 0.0},
        {"search_mode": "near_vector", "l0_weight": 0.1},
        {"search_mode": "hybrid", "l0_weight": 0.0},
        {"search_mode": "hybrid", "l0_weight": 0.1},
    ]
    assert [type(p["top_k"]) for p in parse_grid("top_k=5,30").points()] == [int, int]


@pytest.mark.parametrize(
    "text, named",
    [
        ("", "empty"),
        ("  ;  ", "empty"),
        ("collection=Kb_x", "'collection' is not a setting a sweep can vary"),
        ("vector_wieght=1", "'vector_wieght'"),
        ("l0_weight", "needs NAME=V1,V2"),
        ("l0_weight=", "l0_weight has no values"),
        ("l0_weight=a", "l0_weight needs numbers, got 'a'"),
        ("l0_weight=-1", "l0_weight: -1.0 must not be negative"),
        ("l0_weight=nan", "l0_weight needs finite numbers"),
        ("top_k=2.5", "top_k needs whole numbers, got '2.5'"),
        ("top_k=0", "top_k: 0 must be at least 1"),
        ("search_mode=bm25", "search_mode 'bm25' is not one of fusion, near_vector, hybrid"),
        ("hybrid_alpha=1.5", "hybrid_alpha: 1.5 is not between 0 and 1"),
        ("support_threshold=2", "support_threshold 2.0 is not between 0 and 1"),
        ("embedding_model=gpt-17", "embedding_model 'gpt-17' is not one of bge-small-en-v1.5"),
        ("l0_weight=0;l0_weight=1", "l0_weight is given twice"),
        ("alpha=0.5;hybrid_alpha=0.3", "hybrid_alpha is given twice"),
        ("l0_weight=0,0.0", "lists a value twice"),
        (
            ";".join(
                f"{n}=" + ",".join(str(i) for i in range(1, 8)) for n in ("vector_weight", "lexical_weight", "l0_weight", "top_k")
            ),
            "over the limit",
        ),
    ],
)
def test_parse_grid_refuses_by_name(text, named):
    with pytest.raises(ConfigError, match="grid") as info:
        parse_grid(text)
    assert named in str(info.value)


def test_stratified_folds_deal_each_set_round_the_folds():
    groups = np.array(["a"] * 7 + ["b"] * 3)
    fold_of = stratified_folds(groups, 3, random.Random(1))
    for g, sizes in (("a", [3, 2, 2]), ("b", [1, 1, 1])):
        assert sorted(np.bincount(fold_of[groups == g], minlength=3).tolist(), reverse=True) == sizes


def test_cross_validation_by_hand():
    # point 0 wins on rows 0-1, point 1 on rows 2-3; folds {0, 1} and {2, 3}
    scores = np.array([[1.0, 1.0, 0.0, 0.5], [0.5, 0.5, 1.0, 1.0]])
    cv = cross_validate(scores, ["s"] * 4, folds=2, splits=[np.array([0, 0, 1, 1])])
    # held out {0,1}: trained on {2,3} -> point 1 (1.0 > 0.25), scores 0.5 there
    # held out {2,3}: trained on {0,1} -> point 0 (1.0 > 0.5), scores 0.25 there
    assert cv.picks == (1, 0)
    assert cv.training == (1.0, 1.0)
    assert cv.held_out == (0.5, 0.25)
    assert cv.cv_mean == pytest.approx(0.375)
    assert cv.cv_sd == pytest.approx(math.sqrt(((0.5 - 0.375) ** 2 + (0.25 - 0.375) ** 2) / 1))
    assert cv.chosen() == [(0, 1), (1, 1)]
    # in-sample point 1 looks best (0.75 against 0.625); held out, choosing that way scores 0.375
    assert scores.mean(axis=1).tolist() == [0.625, 0.75]


def test_cross_validation_means_are_macro_over_sets():
    # set a: 2 rows where point 1 is perfect; set b: 4 rows where point 0 is perfect
    scores = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]], dtype=float)
    groups = ["a", "a", "b", "b", "b", "b"]
    cv = cross_validate(scores, groups, folds=2, splits=[np.array([0, 1, 0, 0, 1, 1])])
    # every training split holds one row of a and two of b: a tie at 0.5 each -> the first point (0)
    assert cv.picks == (0, 0) and cv.held_out == (0.5, 0.5)


def test_a_cross_validation_tie_goes_by_the_tiebreak_then_grid_order():
    scores = np.array([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    splits = [np.array([0, 0, 1, 1])]
    assert cross_validate(scores, ["s"] * 4, folds=2, splits=splits).picks == (0, 0)
    assert cross_validate(scores, ["s"] * 4, folds=2, splits=splits, tiebreak=[-2, -1, 0]).picks == (1, 1)


def test_cross_validation_refuses_what_it_cannot_do():
    scores = np.zeros((2, 3))
    with pytest.raises(LookupLabError, match="at least 2 folds"):
        cross_validate(scores, ["a"] * 3, folds=1)
    with pytest.raises(LookupLabError, match="only 3 answerable cases"):
        cross_validate(scores, ["a"] * 3, folds=5)
    with pytest.raises(LookupLabError, match="repeats"):
        cross_validate(scores, ["a"] * 3, folds=2, repeats=0)


def test_shuffled_cross_validation_runs_every_repeat_and_fold():
    rng = np.random.default_rng(3)
    scores = rng.random((4, 20))
    cv = cross_validate(scores, ["a"] * 12 + ["b"] * 8, folds=4, repeats=3, seed=5)
    assert len(cv.held_out) == 12 and len(cv.picks) == 12
    assert cv.to_dict()["held_out"] == list(cv.held_out)
    assert cross_validate(scores, ["a"] * 12 + ["b"] * 8, folds=4, repeats=3, seed=5) == cv  # seeded: the same


def test_paired_test_by_hand():
    same = paired_test([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert (same.p_value, same.delta, same.significant) == (1.0, 0.0, False)
    shifted = paired_test([0.0, 0.0, 0.0], [0.5, 0.5, 0.5])  # every case up by the same amount
    assert shifted.p_value == 0.0 and shifted.significant
    # differences 1, 0, 0, 1: mean 0.5, sd sqrt(1/3), t = 0.5 / (sqrt(1/3) / 2) = sqrt(3), 3 degrees of freedom
    test = paired_test([0.0, 0.5, 1.0, 0.0], [1.0, 0.5, 1.0, 1.0])
    from scipy import stats

    assert test.delta == pytest.approx(0.5)
    assert test.effect_size == pytest.approx(0.5 / math.sqrt(1 / 3))
    assert test.p_value == pytest.approx(2 * stats.t.sf(math.sqrt(3), 3))
    assert test.to_dict()["cases"] == 4 and not test.significant
    assert paired_test([1.0], [0.0]).p_value is None
