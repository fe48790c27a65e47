"""The eval's significance: every configuration against the reference through ranx, Holm-adjusted."""

from __future__ import annotations

import random

import pytest

from retrieval.evals.ranking_metrics import ALPHA, compute_significance, holm, quiet_ranx, ranking_run


def test_holm_multiplies_the_kth_smallest_and_stays_monotone():
    # m = 4 tested: 0.01 × 4, 0.02 × 3, 0.03 × 2 → 0.06 (kept ≥ the one before), 0.5 × 1 → 0.5; None is no test
    assert holm([0.03, 0.01, None, 0.5, 0.02]) == pytest.approx([0.06, 0.04, None, 0.5, 0.06])
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 0.8 × 2 capped at 1; 0.9 kept at least that
    assert holm([]) == [] and holm([None]) == [None]


def test_a_raw_p_below_alpha_can_lose_its_significance_after_correction():
    adjusted = holm([0.02, 0.03, 0.04])
    assert all(p < ALPHA for p in (0.02, 0.03, 0.04))
    assert all(p is not None and p >= ALPHA for p in adjusted)


def runs(seed: int = 3):
    rng = random.Random(seed)
    ids = [f"q{i}" for i in range(60)]
    qrels = quiet_ranx().Qrels({q: {"right": 1} for q in ids})
    good = ranking_run([(q, ["right", "x", "y"]) for q in ids], "lookup")
    noisy = ranking_run([(q, rng.sample(["right", "x", "y", "z"], 4)) for q in ids], "l1_unfiltered")
    same = ranking_run([(q, ["right", "y", "x"]) for q in ids], "bm25")
    return qrels, {"l1_unfiltered": noisy, "lookup": good, "bm25": same}


def test_every_configuration_is_tested_against_the_reference_only():
    qrels, by_name = runs()
    sig = compute_significance(qrels, by_name)
    assert sig["reference"] == "lookup" and sig["correction"] == "holm" and sig["tests"] == 8
    assert {(p["a"], p["b"]) for p in sig["pairs"]} == {("l1_unfiltered", "lookup"), ("bm25", "lookup")}
    noisy = {p["metric"]: p for p in sig["pairs"] if p["a"] == "l1_unfiltered"}
    assert noisy["mrr@10"]["significant"] and noisy["mrr@10"]["a_score"] < noisy["mrr@10"]["b_score"] == 1.0
    assert noisy["mrr@10"]["p_holm"] >= noisy["mrr@10"]["p_value"]
    assert not any(p["significant"] for p in sig["pairs"] if p["a"] == "bm25")  # the same rank of the right entry


def test_without_the_reference_the_first_configuration_is_it():
    qrels, by_name = runs()
    del by_name["lookup"]
    sig = compute_significance(qrels, by_name)
    assert sig["reference"] == "l1_unfiltered" and {p["a"] for p in sig["pairs"]} == {"bm25"}
