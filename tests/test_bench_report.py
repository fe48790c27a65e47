"""The bench's goals: each one met or missed as the figures say."""

from __future__ import annotations

import pytest

from retrieval.bench_report import GOALS, ratios_and_goals


@pytest.mark.parametrize(
    "values, met",
    [
        ({"l0": 1.0, "look": 10.0, "floor": 9.0, "unf": 2.0, "fil": 2.2, "rec": 0.5, "raw": 0.95, "dash": 150.0}, True),
        ({"l0": 3.0, "look": 10.0, "floor": 9.0, "unf": 2.0, "fil": 2.2, "rec": 0.5, "raw": 0.95, "dash": 150.0}, False),
        ({"l0": 1.0, "look": 14.0, "floor": 10.0, "unf": 2.0, "fil": 2.2, "rec": 0.5, "raw": 0.95, "dash": 150.0}, False),
        ({"l0": 1.0, "look": 10.0, "floor": 9.0, "unf": 2.0, "fil": 2.2, "rec": 0.5, "raw": 0.80, "dash": 150.0}, False),
        ({"l0": 1.0, "look": 10.0, "floor": 9.0, "unf": 2.0, "fil": 2.2, "rec": 0.5, "raw": 0.95, "dash": 200.0}, False),
    ],
)
def test_goals_follow_the_figures(values, met):
    def size(l0):
        return {
            "l0": {"p50_ms": l0},
            "lookup": {"p50_ms": values["look"], "stages_p50_ms": {"record": values["rec"]}},
            "floor": {"p50_ms": values["floor"]},
            "l1": {"filtered_p50_ms": values["fil"], "unfiltered_p50_ms": values["unf"]},
            "ingest": {"over_raw": values["raw"], "reingest": {"seconds": 1.0, "chunks_embedded": 0}},
        }

    ratios, goals = ratios_and_goals({10: size(1.0), 100: size(values["l0"])}, {"query_max_ms": values["dash"]})
    assert ratios["l0_p50_growth"] == values["l0"]
    assert set(goals) == set(GOALS)
    assert all(g["met"] for g in goals.values()) is met
