"""Routing metrics on tiny cases computed by hand."""

import pytest

from retrieval.evals.routing_metrics import RoutingObservation as O
from retrieval.evals.routing_metrics import confusion, filter_effect, filter_verdict, routing_metrics

DOMAINS = {"k/A": "k8s", "k/B": "k8s", "d/C": "db", "n/D": "net"}


def test_hand_computed_rates():
    obs = [
        O("1", "k8s", ("k/A",), "k8s"),  # filtered, right domain, keeps its answer
        O("2", "db", ("d/C",), "k8s"),  # filtered, wrong domain, excludes every answer
        O("3", "net", ("n/D",), None, fallback=True),  # unfiltered, answered from L0
        O("4", "k8s", ("k/B", "d/C"), "db"),  # wrong domain, but one answer (d/C) survives: not excluded
        O("5", None, (), "net", semantic_support=False),  # unanswerable, no domain: applied, not in accuracy
        O("6", "db", (), None, semantic_support=True),  # unanswerable, claims support
    ]
    m = routing_metrics(obs, DOMAINS)
    assert m["cases"] == 6
    assert m["filter_applied_rate"] == pytest.approx(4 / 6)
    assert m["routing_accuracy"] == pytest.approx(1 / 3)  # of cases 1, 2, 4: only 1
    assert m["filter_excluded_rate"] == pytest.approx(1 / 3)  # of answerable filtered cases 1, 2, 4: only 2
    assert m["filter_excluded_cases"] == ["2"]
    assert "filter_hurt_rate" not in m  # "hurt" is filter_verdict's, and only that
    assert m["fallback_rate"] == pytest.approx(1 / 6)
    assert m["unanswerable_unsupported_rate"] == pytest.approx(1 / 2)


def test_correct_supported_rate_counts_right_and_supported_top_results():
    obs = [
        O("1", "k8s", ("k/A",), None, semantic_support=True, top_entry="k/A"),  # right, supported
        O("2", "k8s", ("k/A",), None, semantic_support=False, top_entry="k/A"),  # right, not supported
        O("3", "db", ("d/C",), None, semantic_support=True, top_entry="k/B"),  # wrong, supported
        O("4", None, (), None, semantic_support=True, top_entry="k/B"),  # unanswerable: not counted
    ]
    assert routing_metrics(obs, DOMAINS)["correct_supported_rate"] == pytest.approx(1 / 3)


def test_empty_denominators_are_none():
    m = routing_metrics([O("1", "k8s", ("k/A",), None)], DOMAINS)
    assert m["filter_applied_rate"] == 0.0
    assert m["routing_accuracy"] is None and m["filter_excluded_rate"] is None
    assert m["unanswerable_unsupported_rate"] is None


def test_confusion_table():
    table = confusion([O("1", "k8s", (), "k8s"), O("2", "k8s", (), None), O("3", "db", (), "k8s"), O("4", None, (), None)])
    assert table == {"k8s": {"k8s": 1, "(none)": 1}, "db": {"k8s": 1}, "(none)": {"(none)": 1}}


@pytest.mark.parametrize(
    "applied, rr_u, rr_f, verdict",
    [
        (False, 0.0, 1.0, "not applied"),
        (True, 0.5, 1.0, "helped"),
        (True, 1.0, 0.0, "hurt"),
        (True, 0.5, 1 / 3, "hurt"),
        (True, 0.5, 0.5, "no change"),
        (True, 0.0, 0.0, "no change"),
    ],
)
def test_filter_verdict(applied, rr_u, rr_f, verdict):
    assert filter_verdict(applied, rr_u, rr_f) == verdict


def test_filter_effect_counts_and_names_cases():
    effect = filter_effect(
        [("a", True, 1.0, 0.5), ("b", True, 0.5, 1.0), ("c", False, 1.0, 0.0), ("d", True, 1.0, 1.0), ("e", True, 1.0, 0.0)]
    )
    assert effect["counts"] == {"helped": 1, "hurt": 2, "no change": 1, "not applied": 1}
    assert effect["hurt_cases"] == ["a", "e"] and effect["helped_cases"] == ["b"]
    assert "lower reciprocal rank" in effect["definition"]
