"""Evaluate as a tuner uses it, with AppTest on the session's real Weaviate and a temporary DuckDB file (the setup of
tests/app/conftest.py): the quality settings a sweep varies set in the sidebar and kept in the URL, the run's depth."""

from __future__ import annotations

import re

from app_support.setting_widgets import WIDGETS
from retrieval.evals.configs import DEPTH
from retrieval.evals.tuning import SWEEPABLE

from ..conftest import SAMPLE_CORPUS
from ..helpers.app import assert_clean, metrics, open_app, texts


def strip(at, label: str) -> str:
    (line,) = [t for t in texts(at.markdown) if t.startswith(f"**{label}**")]
    return line


def test_every_setting_a_sweep_varies_has_a_sidebar_widget():
    assert set(SWEEPABLE) <= {w.field for w in WIDGETS}, set(SWEEPABLE) - {w.field for w in WIDGETS}


def test_fusion_weights_from_the_url_and_the_sidebar_reach_the_next_run(app_env):
    """A tuner tries vector weight 3 without lookup.yaml or a restart: from the URL, or typed in the sidebar (which
    writes the URL), and the next run's settings say so."""
    at = open_app("Evaluate", vw="3", depth="20", missing="zero")
    line = strip(at, "The next run's settings")
    assert "`vector_weight=3`" in line and "`candidate_depth=20`" in line and "`missing_score=zero`" in line, line
    at.number_input(key="lw").set_value(0.5).run()
    at.number_input(key="support").set_value(0.7).run()
    assert_clean(at)
    line = strip(at, "The next run's settings")
    assert "`lexical_weight=0.5`" in line and "`support_threshold=0.7`" in line and "`vector_weight=3`" in line, line
    assert [e for e in at.sidebar.expander if e.label.startswith("Fusion weights, depth and support (5 changed)")]


def test_the_next_runs_strip_says_why_its_top_k_is_not_the_sidebars(app_env):
    """The sidebar says top-k 5 and the strip top_k=10: the strip says why (an eval ranks 10 deep), not silently."""
    at = open_app("Evaluate")
    assert at.number_input(key="k").value == 5
    assert "`top_k=10`" in strip(at, "The next run's settings")
    notes = [t for t in texts(at.caption) if "top_k=10" in t and "sidebar" in t and "5" in t]
    assert notes, texts(at.caption)


def test_a_set_judged_from_calls_shows_its_coverage_and_marks_unjudged_results(app_env):
    """A set in the judgments folder, one case judged from a recorded call with the other shown results marked not
    relevant: Evaluate shows the coverage figure beside the metrics, the traffic sentence, and unjudged results."""
    folder = app_env / "judged-eval-sets"  # the judgments folder, beside invocations.duckdb
    folder.mkdir()
    (folder / "judged-calls.yaml").write_text(
        f"name: judged-calls\ncorpus: {SAMPLE_CORPUS}\ncases:\n"
        "  - id: one\n    query: Pod checkout-api is in CrashLoopBackOff\n    expected: [kubernetes/PodCrashLoopBackOff]\n"
        "    not_relevant: [kubernetes/PodOOMKilled]\n    invocation: inv-1\n"
        "  - id: two\n    query: the postgres disk is full\n    expected: [databases/PostgresDiskFull]\n"
    )
    at = open_app("Evaluate", es="judged/judged-calls.yaml")
    at.multiselect(key="eval_configs-True").set_value([]).run()  # lookup alone
    at.button(key="run_eval").click().run()
    assert_clean(at)
    label = f"Judgment coverage of lookup's top-{DEPTH}"
    shown = metrics(at)
    assert label in shown and shown[label].endswith("%"), shown
    frame = next(d.value for d in at.dataframe if f"unjudged in lookup's top-{DEPTH}" in d.value.columns)
    marks = dict(zip(frame["case"], frame[f"unjudged in lookup's top-{DEPTH}"], strict=True))
    assert "(unjudged)" in marks["two"]  # only its expected entry is judged
    assert "kubernetes/PodOOMKilled" not in marks["one"]  # judged not relevant
    unjudged = sum(m.count("(unjudged)") for m in marks.values())
    words = " ".join(texts(at.caption))
    found = re.search(r"(\d+) of (\d+) results carry a judgment; the metrics count the other (\d+)", words)
    assert found and int(found.group(3)) == unjudged, words
    assert shown[label] == f"{int(found.group(1)) / int(found.group(2)):.0%}"
    assert "1 of its 2 cases were judged from recorded calls" in words
