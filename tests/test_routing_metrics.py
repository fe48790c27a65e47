"""Routing metrics on tiny cases computed by hand."""

import pytest

from retrieval.routing_metrics import RoutingObservation as O
from retrieval.routing_metrics import confusion, routing_metrics

DOMAINS = {"k/A": "k8s", "k/B": "k8s", "d/C": "db", "n/D": "net"}


def test_hand_computed_rates():
    obs = [
        O("1", "k8s", ("k/A",), "k8s"),                     # filtered, right domain, keeps its answer
        O("2", "db", ("d/C",), "k8s"),                      # filtered, wrong domain, excludes every answer: hurt
        O("3", "net", ("n/D",), None, fallback=True),       # unfiltered, answered from L0
        O("4", "k8s", ("k/B", "d/C"), "db"),                # wrong domain, but one answer (d/C) survives: not hurt
        O("5", None, (), "net", semantic_support=False),    # unanswerable, no domain: applied, not in accuracy
        O("6", "db", (), None, semantic_support=True),      # unanswerable, claims support
    ]
    m = routing_metrics(obs, DOMAINS)
    assert m["cases"] == 6
    assert m["filter_applied_rate"] == pytest.approx(4 / 6)
    assert m["routing_accuracy"] == pytest.approx(1 / 3)   # of cases 1, 2, 4: only 1
    assert m["filter_hurt_rate"] == pytest.approx(1 / 3)   # of answerable filtered cases 1, 2, 4: only 2
    assert m["filter_hurt_cases"] == ["2"]
    assert m["fallback_rate"] == pytest.approx(1 / 6)
    assert m["unanswerable_unsupported_rate"] == pytest.approx(1 / 2)


def test_correct_supported_rate_counts_right_and_supported_top_results():
    obs = [
        O("1", "k8s", ("k/A",), None, semantic_support=True, top_entry="k/A"),    # right, supported
        O("2", "k8s", ("k/A",), None, semantic_support=False, top_entry="k/A"),   # right, not supported
        O("3", "db", ("d/C",), None, semantic_support=True, top_entry="k/B"),     # wrong, supported
        O("4", None, (), None, semantic_support=True, top_entry="k/B"),           # unanswerable: not counted
    ]
    assert routing_metrics(obs, DOMAINS)["correct_supported_rate"] == pytest.approx(1 / 3)


def test_empty_denominators_are_none():
    m = routing_metrics([O("1", "k8s", ("k/A",), None)], DOMAINS)
    assert m["filter_applied_rate"] == 0.0
    assert m["routing_accuracy"] is None and m["filter_hurt_rate"] is None
    assert m["unanswerable_unsupported_rate"] is None


def test_confusion_table():
    table = confusion([O("1", "k8s", (), "k8s"), O("2", "k8s", (), None), O("3", "db", (), "k8s"), O("4", None, (), None)])
    assert table == {"k8s": {"k8s": 1, "(none)": 1}, "db": {"k8s": 1}, "(none)": {"(none)": 1}}
