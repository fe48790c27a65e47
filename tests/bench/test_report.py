"""The bench's goals: each one met or missed as the figures say."""

from __future__ import annotations

import pytest

from retrieval.bench.report import GOALS, _strategy_cell, ratios_and_goals

OK = {
    "l0": 1.0,
    "look": 10.0,
    "floor": 9.0,
    "unf": 2.0,
    "fil": 1.9,
    "recall": 0.99,
    "rec": 0.5,
    "raw": 0.95,
    "dash": 150.0,
    "page": 250.0,
    "rows_s": 25_000,
    "peak": 700.0,
    "load": 0.4,
    "rss": 450.0,
    "first_page": 3.1,
    "warm": 1.4,
    "cli": 1.3,
    "ingest_floor": 0.85,
    "embed_floor": 0.95,
    "cli_ratio": 1.2,
    "traffic": 900.0,
    "trace": 60.0,
    "classify": 0.01,
    "traffic_rss": 600.0,
}


@pytest.mark.parametrize(
    "changes, met",
    [
        ({}, True),
        ({"l0": 3.0}, False),
        ({"look": 14.0, "floor": 10.0}, False),
        ({"raw": 0.80}, False),
        ({"dash": 200.0}, False),
        ({"page": 300.0}, False),
        ({"rows_s": 19_999}, False),
        ({"peak": 1501.0}, False),
        ({"load": 1.2}, False),
        ({"rss": 650.0}, False),
        ({"first_page": 5.2}, False),  # a cold start's first page later than 5 s
        ({"warm": 2.3}, False),  # the slowest warm page over 2 s
        ({"fil": 2.1}, False),  # filtered L1 slower than unfiltered (goal <= 1.0)
        ({"recall": 0.97}, False),  # filtered recall@10 against the exact filtered ranking (goal >= 0.98)
        ({"cli": 1.6}, False),
        ({"ingest_floor": 0.5}, False),  # the ingest at half of Weaviate's bare insert
        (
            {"embed_floor": 0.8},
            False,
        ),  # embedding at ingest under 0.9 of the model's best way  # a CLI lookup with a standing server over 1.5 s
        ({"cli_ratio": 1.6}, False),  # over 1.5 times start-up with imports plus an in-process lookup
        ({"traffic": 2100.0}, False),  # the Traffic page's slowest warm read over 2 s
        ({"traffic_rss": 1600.0}, False),  # the process reading traffic over its memory
    ],
)
def test_goals_follow_the_figures(changes, met):
    values = {**OK, **changes}

    def size(l0):
        return {
            "l0": {"p50_ms": l0},
            "lookup": {"p50_ms": values["look"], "stages_p50_ms": {"record": values["rec"]}},
            "floor": {"p50_ms": values["floor"]},
            "l1": {"filtered_p50_ms": values["fil"], "unfiltered_p50_ms": values["unf"], "filtered_recall": values["recall"]},
            "ingest": {
                "over_raw": values["raw"],
                "reingest": {"seconds": 1.0, "chunks_embedded": 0},
                "over_floor": values["ingest_floor"],
                "embed_over_floor": values["embed_floor"],
            },
            "explain": {"trace_p95_ms": values["trace"], "classify_share_of_lookup": values["classify"]},
        }

    ratios, goals = ratios_and_goals(
        {10: size(1.0), 100: size(values["l0"])},
        {
            "query_max_ms": values["dash"],
            "page_load_ms": values["page"],
            "insert_rows_per_s": values["rows_s"],
            "insert_peak_rss_mb": values["peak"],
            "loadavg": [1.5, 1.0, 0.9],
            "traffic_max_ms": values["traffic"],
            "traffic_peak_rss_mb": values["traffic_rss"],
            "traffic_loadavg": [2.5, 2.0, 1.9],
        },
        model_load_s=values["load"],
        app_rss_mb=values["rss"],
        app_fig={
            "cold_first_page": {"s": values["first_page"], "l1_connected_s": 9.0, "loadavg": 1.7},
            "pages": {
                "Runs": {"first_s": 2.0, "warm_s": 0.6, "loadavg": 1.1},
                "Invocations": {"first_s": 2.5, "warm_s": values["warm"], "loadavg": 1.3},
            },
        },
        cli_fig={"warm_s": values["cli"], "over_in_process": values["cli_ratio"], "loadavg": 0.8},
    )
    assert ratios["l0_p50_growth"] == values["l0"] and ratios["reingest_s"] == 1.0
    # the slowest warm page is the page goal, with the load it was measured at; the cold first page with its own
    assert goals["app_warm_page_max_s"] == {
        "value": values["warm"],
        "goal": "<= 2.0",
        "met": values["warm"] <= 2.0,
        "loadavg": 1.3,
    }
    assert goals["app_first_page_s"]["value"] == values["first_page"] and goals["app_first_page_s"]["loadavg"] == 1.7
    assert set(goals) == set(GOALS)
    assert all(g["met"] for g in goals.values()) is met
    assert goals["model_load_s"] == {"value": values["load"], "goal": "<= 1.0", "met": values["load"] <= 1.0}
    assert goals["app_rss_mb"] == {"value": values["rss"], "goal": "<= 600.0", "met": values["rss"] <= 600.0}
    assert goals["store_insert_rows_per_s"]["loadavg"] == 1.5  # the load as the insert ended
    assert goals["traffic_warm_max_ms"] == {
        "value": values["traffic"],
        "goal": "<= 2000.0",
        "met": values["traffic"] <= 2000.0,
        "loadavg": 2.5,
    }
    assert goals["cli_warm_lookup_s"] == {"value": values["cli"], "goal": "<= 1.5", "met": values["cli"] <= 1.5, "loadavg": 0.8}


def test_l0_growth_is_the_side_by_side_timing_when_there_is_one():
    def size(l0):
        return {
            "l0": {"p50_ms": l0},
            "lookup": {"p50_ms": 10.0, "stages_p50_ms": {"record": 0.5}},
            "floor": {"p50_ms": 9.0},
            "l1": {"filtered_p50_ms": 2.0, "unfiltered_p50_ms": 2.0},
            "ingest": {"over_raw": 1.0, "reingest": {"seconds": 1.0, "chunks_embedded": 0}},
            "loadavg": {"l0": 3.0},
        }

    sizes = {10: size(0.5), 100: size(1.5)}  # apart: growth 3.0
    ratios, goals = ratios_and_goals(sizes, None)
    assert ratios["l0_p50_growth"] == 3.0 and goals["l0_p50_growth"]["met"] is False
    paired = {"growth": 1.4, "loadavg": 0.7}
    ratios, goals = ratios_and_goals(sizes, None, l0_paired=paired)
    assert ratios["l0_p50_growth"] == 1.4 and goals["l0_p50_growth"] == {
        "value": 1.4,
        "goal": "<= 2.0",
        "met": True,
        "loadavg": 0.7,
    }


def test_a_figure_not_measured_is_neither_met_nor_missed():
    size = {
        "l0": {"p50_ms": 1.0},
        "lookup": {"p50_ms": 10.0, "stages_p50_ms": {"record": 0.5}},
        "floor": {"p50_ms": 9.0},
        "l1": {"filtered_p50_ms": 2.0, "unfiltered_p50_ms": 2.0},
        "ingest": {"over_raw": 1.0, "reingest": {"seconds": 1.0, "chunks_embedded": 0}},
    }
    _, goals = ratios_and_goals({10: size}, None, model_load_s=0.3)
    assert goals["app_rss_mb"]["met"] is None and goals["dashboard_query_max_ms"]["met"] is None
    assert goals["model_load_s"]["met"] is True


def test_each_goal_carries_the_load_average_it_was_measured_at():
    size = {
        "l0": {"p50_ms": 1.0},
        "lookup": {"p50_ms": 10.0, "stages_p50_ms": {"record": 0.5}},
        "floor": {"p50_ms": 9.0},
        "l1": {"filtered_p50_ms": 2.0, "unfiltered_p50_ms": 2.0, "filtered_recall": 0.99},
        "ingest": {"over_raw": 1.0, "reingest": {"seconds": 12.5, "chunks_embedded": 0}},
        "loadavg": {"start": 0.5, "ingest": 3.25, "l0": 1.5, "lookups": 2.75, "l1": 2.5},
    }
    ratios, goals = ratios_and_goals({10: size}, None)
    assert ratios["reingest_s"] == 12.5
    assert (goals["l0_p50_growth"]["loadavg"], goals["reingest_s"]["loadavg"], goals["filtered_recall"]["loadavg"]) == (
        1.5,
        3.25,
        2.5,
    )
    assert goals["filtered_over_unfiltered"]["loadavg"] == 2.75 and "loadavg" not in goals["model_load_s"]


@pytest.mark.parametrize(
    "figures, cell",
    [
        (None, "n/a"),
        (
            {"unfiltered_p50_ms": 4.0, "filtered_p50_ms": 5.0, "filtered_over_unfiltered": 1.25, "loadavg": 5.9},
            "4.0 / 5.0, 1.25 (5.9)",
        ),
        (
            {"unfiltered_p50_ms": 4.0, "filtered_p50_ms": 3.6, "filtered_over_unfiltered": 0.9, "loadavg": 2, "agreement": 0.97},
            "4.0 / 3.6, 0.9 (2), top-k agreement 0.97",
        ),
    ],
)
def test_a_filter_strategy_row_shows_its_agreement_with_the_exact_search(figures, cell):
    size = {"filter_strategies": {} if figures is None else {"acorn": figures}}
    assert _strategy_cell("acorn", size) == cell


def test_the_page_table_lists_each_page_with_goal_and_load():
    from retrieval.bench.report import _page_lines

    app = {
        "entries": 1000,
        "first_page": {"s": 2.4, "loadavg": 0.9},
        "cold_first_page": {"s": 3.2, "l1_connected_s": 11.0, "server_start_s": 1.5, "loadavg": 1.2},
        "pages": {"Invocations": {"first_s": 1.9, "warm_s": 0.8, "loadavg": 1.0}},
    }
    lines = _page_lines(app)
    assert lines[0] == "| app page (1000 entries) | first s | warm s | goal | load |"
    assert (
        "| first page after the server's start, embedded Weaviate starting cold | 3.2 (L1 connected at 11.0) | – | <= 5.0 | 1.2 |"
        in lines
    )
    assert "| Invocations | 1.9 | 0.8 | <= 2.0 warm | 1.0 |" in lines
    missing = _page_lines({**app, "cold_first_page": {"s": None, "why": "no Weaviate binary"}})
    assert any("n/a: no Weaviate binary" in line for line in missing)
    assert _page_lines({"rss_mb": None}) == []
