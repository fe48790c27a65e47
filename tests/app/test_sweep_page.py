"""The Sweep page with AppTest, on the session's real Weaviate (collection TestSample) and a temporary settings file:
picking sets, a refused grid, a sweep drawn as a heatmap with best against current, and lookup.yaml saved only
after its diff was shown (and not at all when the app is read-only)."""

from __future__ import annotations

import pandas as pd
import plotly.io
from streamlit.testing.v1 import AppTest

from app_support.charts import sweep_figure
from retrieval.config import load_settings
from retrieval.evals.metric_names import metric_label

from ..helpers.app import APP, assert_clean, texts

PAGE = "pages/sweep.py"


def open_sweep() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)  # a ceiling for a busy machine, not a wait
    at.run()
    at.switch_page(PAGE).run()
    assert_clean(at)
    return at


def test_sweep_page_runs_draws_and_saves_after_the_diff(app_env, served_on):
    at = open_sweep()
    assert at.title[0].value == "Sweep"
    assert at.multiselect(key="sweep_sets-TestSample").value == ["eval_sets/sample-ops-alerts.yaml"]  # fits the sample corpus
    assert not [o for o in at.multiselect(key="sweep_sets-TestSample").options if o.startswith("shared/")]
    # a grid naming an unknown setting is refused by name, and nothing can run
    at.text_input(key="sweep_grid").input("vector_weight=1;colour=2").run()
    assert [e for e in texts(at.error) if "'colour' is not a setting a sweep can vary" in e]
    assert "run_sweep" not in {b.key for b in at.button}
    # two axes: a heatmap; every point differs from the defaults (vector weight 3, L0 weight 0)
    at.text_input(key="sweep_grid").input("vector_weight=1,1.5;l0_weight=0.1,0.2").run()
    assert [c for c in texts(at.caption) if c.startswith("4 points × 48 cases; 2 Weaviate queries per case")]
    at.button(key="run_sweep").click().run()
    assert_clean(at)
    said = " ".join(texts(at.markdown))
    assert "held-out folds" in said and " ± " in said and "(3×5 folds)" in said and "paired t-test over 48 cases" in said
    table = at.table[0].value
    assert list(table.index) == ["best", "current"]
    assert list(table.columns) == ["MRR@10", "Hit@1", "Recall@5", "right and supported", "unanswerable unsupported"]
    figure = plotly.io.from_json(at.get("plotly_chart")[0].proto.spec)
    heatmap = figure.data[0]
    assert heatmap.type == "heatmap" and len(heatmap.x) == len(heatmap.y) == 2  # vector_weight across, l0_weight up
    assert (figure.layout.xaxis.type, figure.layout.yaxis.type) == ("category", "category")  # no axis past the grid
    points = at.dataframe[0].value
    assert {"MRR@10", "Hit@1"} <= set(points.columns) and "mrr@10" not in points.columns, list(points.columns)
    # each cell is its difference from the best, labelled so; the scale spans at least 0.05 whatever the gaps
    cells = [v for row in heatmap.z for v in row]
    assert max(cells) == 0.0 and all(v <= 0.0 for v in cells)
    assert heatmap.zmax == 0.0 and heatmap.zmin <= -0.05 and heatmap.zmin <= min(cells)
    labels = [t for row in heatmap.text for t in row]
    assert "best" in labels and all(t == "best" or t.startswith(("-", "+")) for t in labels), labels
    assert "None" not in str(table.to_numpy().tolist())  # a figure that does not apply reads –
    strip = [t for t in texts(at.markdown) if t.startswith("**Current settings")]
    assert strip and "`vector_weight=" in strip[0] and "`search_mode=fusion`" in strip[0] and "`top_k=" in strip[0]
    # the diff against the defaults (no settings file yet) is on the page before anything is written
    settings_file = app_env / "no-lookup.yaml"
    diff = at.code[0].value
    assert diff.startswith("--- /dev/null") and "+vector_weight: " in diff and "+l0_weight: " in diff
    assert not settings_file.exists()
    # read-only: the diff still shows, the write button does not
    served_on("0.0.0.0")
    at.run()
    assert at.code[0].value == diff and "sweep_save" not in {b.key for b in at.button}
    assert [c for c in texts(at.caption) if c.startswith("Writing is off: the app is read-only")]
    served_on("127.0.0.1")
    at.run()
    # beside Save: the significance and support figures, and why saving may be a guess (no unanswerable set here)
    said = " ".join(texts(at.markdown))
    assert "Before you save" in said and "unanswerable left unsupported" in said and "on 0 unanswerable cases" in said
    assert [w for w in texts(at.warning) if w.startswith("No unanswerable case was measured")]
    assert at.button(key="sweep_save").disabled and at.button(key="sweep_save").label == f"Write {settings_file.resolve()}"
    at.checkbox(key="sweep_save_anyway").check().run()
    at.button(key="sweep_save").click().run()
    assert_clean(at)
    assert [s for s in texts(at.success) if s.startswith(f"Written: {settings_file}")]
    # "current" was measured before the save: said so, not shown as the settings now
    assert list(at.table[0].value.index) == ["best", "before the save"]
    assert [
        i for i in texts(at.info) if i.startswith("**Current is now the best point**") or "Current is now the best point" in i
    ]
    saved = load_settings(config_file=settings_file, env={})
    best = at.session_state["_sweep"][1].best.point.settings
    assert (saved.vector_weight, saved.l0_weight) == (best["vector_weight"], best["l0_weight"])
    # the file now gives the best settings: nothing more to write
    assert [c for c in texts(at.caption) if "already gives the best settings" in c] and not at.code


def test_one_setting_draws_a_line_and_three_draw_parallel_coordinates(app_env):
    at = open_sweep()
    for grid, kind, axes in (
        ("l0_weight=0,0.2", "scatter", None),
        (
            "search_mode=fusion,near_vector;vector_weight=1,3;l0_weight=0,0.2",
            "parcoords",
            ["search_mode", "vector_weight", "l0_weight", "MRR@10"],
        ),
    ):
        at.text_input(key="sweep_grid").input(grid).run()
        at.button(key="run_sweep").click().run()
        assert_clean(at)
        figure = plotly.io.from_json(at.get("plotly_chart")[0].proto.spec)
        assert figure.data[0].type == kind
        if axes:
            assert [d.label for d in figure.data[0].dimensions] == axes
            assert list(figure.data[0].dimensions[0].ticktext) == ["fusion", "near_vector"]
        assert len(at.session_state["_sweep"][1].points) == (2 if kind == "scatter" else 8)


def test_two_styles_leave_one_set_out_and_the_page_shows_each_held_out_set(app_env):
    at = open_sweep()
    picked = [
        "eval_sets/sample-ops-alerts.yaml",
        "eval_sets/sample-ops-issue-titles.yaml",
        "eval_sets/sample-ops-unanswerable.yaml",
    ]
    at.multiselect(key="sweep_sets-TestSample").set_value(picked).run()
    assert at.radio(key="sweep_cv-sets").value == "sets"  # two answerable sets: leave one set out by default
    assert at.number_input(key="sweep_folds").disabled  # the folds are k-fold's
    at.text_input(key="sweep_grid").input("vector_weight=1,2.5").run()
    at.button(key="run_sweep").click().run()
    assert_clean(at)
    said = " ".join(texts(at.markdown))
    assert "held-out sets" in said and "**Leave one set out**" in said and "choosing by the mean set" in said
    frame = at.dataframe[0].value
    assert list(frame.columns)[:3] == ["held out", "set", "MRR@10"]
    assert set(frame["set"]) == {"sample-ops-alerts", "sample-ops-issue-titles", "sample-ops-unanswerable"}
    result = at.session_state["_sweep"][1]
    rows = {r.set_name: r for r in result.validation.by_set.rows}
    shown = dict(zip(frame["set"], frame["MRR@10"], strict=True))
    assert shown["sample-ops-issue-titles"] == f"{rows['sample-ops-issue-titles'].held_out['mrr@10']:.3f}"
    assert shown["sample-ops-unanswerable"] == "–"  # no right answer: its promise is the figure
    # k-fold on request: the folds apply again and the estimate reads as folds
    at.radio(key="sweep_cv-sets").set_value("kfold").run()
    at.button(key="run_sweep").click().run()
    assert_clean(at)
    assert "held-out folds" in " ".join(texts(at.markdown)) and at.session_state["_sweep"][1].validation.method == "kfold"


def test_when_the_defaults_give_the_best_the_page_says_the_defaults(app_env):
    at = open_sweep()
    current = load_settings()
    at.text_input(key="sweep_grid").input(f"vector_weight={current.vector_weight:g}").run()  # one point: the current one
    at.button(key="run_sweep").click().run()
    assert_clean(at)
    (said,) = [c for c in texts(at.caption) if "the best settings: nothing to write" in c]
    assert said.startswith("The defaults (") and "does not exist) already give the best settings" in said
    assert not at.code  # no diff: nothing to write


def test_the_sweep_heatmap_has_an_axis_tick_per_cell_and_names_the_metric():
    """Numbers as settings read as categories: a linear axis ran past the grid (ticks at 0.05 and 0.25 around cells
    at 0.1 and 0.2), and the metric read as its key."""
    frame = pd.DataFrame(
        [
            {"vector_weight": v, "l0_weight": w, "mrr@10": 0.8 - i / 100}
            for i, (v, w) in enumerate([(1, 0.1), (1, 0.2), (1.5, 0.1), (1.5, 0.2)])
        ]
    )
    figure = sweep_figure(frame, ["vector_weight", "l0_weight"], "mrr@10")
    assert (figure.layout.xaxis.type, figure.layout.yaxis.type) == ("category", "category"), figure.layout
    assert figure.layout.title.text.startswith("MRR@10 per point"), figure.layout.title.text
    assert figure.data[0].colorbar.title.text == "MRR@10 − best"
    assert metric_label("mrr_at_10") == "MRR@10" and metric_label("ndcg@10") == "nDCG@10"
