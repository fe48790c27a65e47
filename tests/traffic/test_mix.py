"""The mix report on hand-computed counts: shares, the Jensen–Shannon divergence, the sentences, the style lacking."""

from __future__ import annotations

import math

import pytest

from retrieval.errors import TrafficError
from retrieval.traffic.features import FEATURES, UNFILTERED
from retrieval.traffic.mix import DIVERGENCE, js_divergence, mix_report, pct, share_sentence


def _counts(**overrides):
    base = {
        "query_words": {"6–10 words": 10},
        "query_form": {"sentence": 10},
        "routed_domain": {"vm": 10},
        "filtered": {"yes": 10},
        "l0_match": {"yes": 10},
        "fallback": {"no": 10},
        "support": {"0.9–1.0": 10},
    }
    return {**base, **overrides}


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        ((0.5, 0.5), (0.5, 0.5), 0.0),
        ((1.0, 0.0), (0.0, 1.0), 1.0),
        # M = (0.75, 0.25); KL(p|M) = log2(4/3); KL(q|M) = 0.5 log2(2/3) + 0.5 log2(2)
        ((1.0, 0.0), (0.5, 0.5), (math.log2(4 / 3) + 0.5 * math.log2(2 / 3) + 0.5) / 2),
    ],
)
def test_js_divergence(p, q, expected):
    assert js_divergence(p, q) == pytest.approx(expected)
    assert js_divergence(q, p) == pytest.approx(expected)


def test_the_issue_sentence():
    assert share_sentence("query_words", "1–5 words", 0.41, 0.03, ["a", "b"]) == (
        "41% of calls are 1–5-word queries; the chosen eval sets have 3% such cases."
    )
    assert share_sentence("routed_domain", UNFILTERED, 0.2, 0.0, ["summaries"]) == (
        "20% of calls search unfiltered; the chosen eval set (summaries) has 0% such cases."
    )
    assert pct(0.004) == "<1%" and pct(0.0) == "0%"


def test_a_report_names_the_largest_difference_and_the_style_lacking():
    traffic = _counts(
        query_words={"1–5 words": 41, "6–10 words": 59},
        query_form={"title-like": 70, "sentence": 30},
        routed_domain={"vm": 80, UNFILTERED: 20},
        filtered={"yes": 80, "no": 20},
    )
    evals = _counts(query_words={"1–5 words": 3, "6–10 words": 97}, query_form={"title-like": 4, "sentence": 96})
    report = mix_report(traffic, evals, set_names=["kubevirt-alert-summaries"])
    assert [m.feature for m in report.features] == list(FEATURES)
    words = report.feature("query_words")
    assert words.bins == ("1–5 words", "6–10 words") and words.traffic == (0.41, 0.59) and words.evals == (0.03, 0.97)
    assert words.widest == "1–5 words"
    assert (
        words.sentence == "41% of calls are 1–5-word queries; the chosen eval set (kubevirt-alert-summaries) has 3% such cases."
    )
    assert report.feature("support").divergence == 0.0
    form = report.feature("query_form")
    assert report.largest == "query_form" and form.divergence == max(m.divergence for m in report.features)
    assert report.sentence == form.sentence and "70% of calls are title-like queries" in form.sentence
    assert report.lacking is not None and (report.lacking.feature, report.lacking.bin) == ("query_form", "title-like")
    assert "title-like queries (70% of calls, 4% of the cases)" in report.lacking.sentence
    routed = report.feature("routed_domain")
    assert routed.bins == ("vm", UNFILTERED) and routed.evals == (1.0, 0.0)
    out = report.to_dict()
    assert out["divergence"] == DIVERGENCE and "base 2" in out["divergence"]
    assert out["lacking"]["bin"] == "title-like" and out["features"][0]["bins"][0] == {
        "bin": "1–5 words",
        "traffic": 0.41,
        "evals": 0.03,
    }


def test_fixed_bins_keep_their_order_and_unseen_bins_are_left_out():
    traffic = _counts(support={"no estimate": 5, "0.9–1.0": 3, "0.0–0.1": 2})
    mix = mix_report(traffic, _counts(), set_names=["s"]).feature("support")
    assert mix.bins == ("0.0–0.1", "0.9–1.0", "no estimate")
    assert sum(mix.traffic) == pytest.approx(1.0) and sum(mix.evals) == pytest.approx(1.0)


def test_the_same_mix_lacks_no_style():
    report = mix_report(_counts(), _counts(), set_names=["s"])
    assert report.lacking is None and all(m.divergence == 0.0 for m in report.features)


@pytest.mark.parametrize(
    ("traffic", "evals", "said"),
    [
        ({}, _counts(), "the traffic has no calls"),
        (_counts(query_form={}), _counts(), "feature 'query_form'"),
        (_counts(), {f: {} for f in FEATURES}, "the chosen eval sets (summaries) have no cases"),
    ],
)
def test_an_empty_side_is_refused(traffic, evals, said):
    with pytest.raises(TrafficError) as err:
        mix_report(traffic, evals, set_names=["summaries"])
    assert said in str(err.value)


def test_the_sentence_names_what_the_traffic_holds_beyond_the_sets_not_what_it_lacks():
    traffic = _counts(query_words={"1–5 words": 41, "6–10 words": 30, "11–20 words": 29})
    evals = _counts(query_words={"1–5 words": 3, "6–10 words": 97})
    words = mix_report(traffic, evals, set_names=["a", "b"]).feature("query_words")
    assert words.widest == "1–5 words"  # 6–10 words differs more (67 points), but the traffic holds less of it
    assert words.sentence == "41% of calls are 1–5-word queries; the chosen eval sets have 3% such cases."
    filtered = mix_report(_counts(filtered={"yes": 80, "no": 20}), _counts(), set_names=["a"]).feature("filtered")
    assert filtered.widest == "no"
