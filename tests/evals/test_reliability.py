import pytest

from retrieval.evals.reliability import reliability


def test_reliability_by_hand():
    # four cases at 0.95 (three right), two at 0.15 (none right), one at 1.0 (right)
    rel = reliability([0.95, 0.95, 0.95, 0.95, 0.15, 0.15, 1.0], [True, True, True, False, False, False, True])
    assert rel.cases == 7
    assert [(b.low, b.high, b.count) for b in rel.bins] == [(0.1, 0.2, 2), (0.9, 1.0, 5)]  # 1.0 falls in the last bin
    top = rel.bins[1]
    assert top.predicted == pytest.approx((0.95 * 4 + 1.0) / 5) and top.observed == pytest.approx(4 / 5)
    assert rel.ece == pytest.approx(2 / 7 * 0.15 + 5 / 7 * abs((0.95 * 4 + 1.0) / 5 - 0.8))
    assert rel.predicted_hit1 == pytest.approx((0.95 * 4 + 0.3 + 1.0) / 7) and rel.hit1 == pytest.approx(4 / 7)
    data = rel.to_dict()
    assert data["gap"] == pytest.approx(round(rel.predicted_hit1 - rel.hit1, 4)) and len(data["bins"]) == 2


def test_a_calibrated_estimate_has_no_error_and_bad_input_is_refused():
    assert reliability([0.5, 0.5], [True, False]).ece == 0.0
    assert reliability([], []) is None
    with pytest.raises(ValueError, match="2 estimates for 1 outcomes"):
        reliability([0.1, 0.2], [True])
    with pytest.raises(ValueError, match=r"between 0 and 1, got 1\.5"):
        reliability([1.5], [True])
