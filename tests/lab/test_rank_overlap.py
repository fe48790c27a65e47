"""overlap@k and RBO_ext on rankings small enough to work out by hand (p = 0.9 unless said)."""

from __future__ import annotations

import pytest

from retrieval.errors import LookupLabError
from retrieval.lab.rank_overlap import overlap_at_k, rbo


@pytest.mark.parametrize(
    "before, after, k, expected",
    [
        ("abc", "abc", None, 1.0),
        ("abc", "cba", None, 1.0),
        ("abc", "abd", None, 2 / 3),
        ("abc", "xyz", None, 0.0),
        ("abcd", "ab", None, 2 / 4),  # k: the longer list
        ("abcd", "bacz", 2, 1.0),
        ("", "", None, 1.0),
        ("a", "", None, 0.0),
    ],
)
def test_overlap_at_k(before, after, k, expected):
    assert overlap_at_k(list(before), list(after), k) == pytest.approx(expected)


@pytest.mark.parametrize(
    "before, after, expected",
    [
        ("abcde", "abcde", 1.0),  # (1-p)/p * sum(p^d) + p^5 = 1 - p^5 + p^5
        ("abc", "xyz", 0.0),
        ("ab", "ba", 0.9),  # X = (0, 2): 1/9 * (2/2 * 0.81) + 2/2 * 0.81 = 0.09 + 0.81
        ("ab", "ca", 0.45),  # X = (0, 1): 1/9 * 0.405 + 0.405
        ("abc", "acd", 0.685),  # X = (1, 1, 2): 1/9 * (0.9 + 0.405 + 0.486) + 2/3 * 0.729
        ("ab", "a", 1.0),  # the short list agrees as far as it goes: extrapolated to agree on
        ("abc", "b", 0.315),  # X = (0, 1, 1), X_s = 0: 1/9 * (0.405 + 0.243) + 1/3 * 0.729
        ("", "", 1.0),
        ("", "ab", 0.0),
    ],
)
def test_rbo_ext_by_hand(before, after, expected):
    assert rbo(list(before), list(after)) == pytest.approx(expected, abs=1e-9)
    assert rbo(list(after), list(before)) == pytest.approx(expected, abs=1e-9)  # symmetric


def test_rbo_weighs_the_top_more_and_takes_p():
    assert rbo(list("abcd"), list("bacd")) < rbo(list("abcd"), list("abdc"))  # a swap at the top costs more
    assert rbo(list("ab"), list("ba"), p=0.5) == pytest.approx(0.5)  # X = (0, 2): 0.5/0.5 * 0.25 + 0.25
    with pytest.raises(LookupLabError, match="p 1"):
        rbo(["a"], ["a"], p=1)
