"""The mix section under AppTest on a tiny script, and the frames and figures it builds."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_support.traffic_mix_view import divergence_table, eval_counts, mix_chart, mix_frame
from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.errors import TrafficError
from retrieval.evals.sets import load_eval_set
from retrieval.traffic.eval_side import eval_feature_counts
from retrieval.traffic.features import FEATURES
from retrieval.traffic.mix import mix_report

TRAFFIC = {
    "query_words": {"1–5 words": 41, "6–10 words": 59},
    "query_form": {"title-like": 70, "sentence": 30},
    "routed_domain": {"vm": 80, "(unfiltered)": 20},
    "filtered": {"yes": 80, "no": 20},
    "l0_match": {"yes": 100},
    "fallback": {"no": 100},
    "support": {"0.9–1.0": 60, "no estimate": 40},
}
EVALS = {**TRAFFIC, "query_words": {"1–5 words": 3, "6–10 words": 97}, "query_form": {"title-like": 4, "sentence": 96}}


def _script():
    from app_support.traffic_mix_view import mix_section
    from retrieval.traffic.mix import mix_report
    from tests.app.test_traffic_mix_view import EVALS, TRAFFIC

    mix_section(mix_report(TRAFFIC, EVALS, set_names=["kubevirt-alert-summaries"]))


def test_the_section_leads_with_the_sentence_then_the_table_and_a_chart_per_feature():
    at = AppTest.from_function(_script, default_timeout=120).run()
    assert not at.exception
    texts = [m.value for m in at.markdown]
    assert "70% of calls are title" in texts[0].replace("\\", "")
    assert any("lacks most: title-like queries" in t.replace("\\", "") for t in texts)
    assert len(at.dataframe) == 1 and at.dataframe[0].value["feature"].iloc[0] == "query form"
    assert len(at.get("plotly_chart")) == len(FEATURES)
    assert any("base 2" in c.value for c in at.caption)


def test_the_frames_and_the_figure():
    report = mix_report(TRAFFIC, EVALS, set_names=["s"])
    table = divergence_table(report)
    assert list(table["feature"])[:2] == ["query form", "query length (words)"]
    assert list(table["divergence"]) == sorted(table["divergence"], reverse=True)
    assert table.loc[table["feature"] == "fallback rate", "traffic has more of"].item() == "–"  # the same on both sides
    assert table.loc[table["feature"] == "query form", "traffic has more of"].item() == "title-like"
    words = report.feature("query_words")
    frame = mix_frame(words)
    assert len(frame) == 2 * len(words.bins) and set(frame["side"]) == {"traffic", "eval sets"}
    fig = mix_chart(words)
    assert [t.name for t in fig.data] == ["traffic", "eval sets"] and fig.layout.barmode == "group"
    assert list(fig.data[0].y) == list(words.bins) and list(fig.data[1].x) == list(words.evals)
    assert "JS 0." in fig.layout.title.text


def test_eval_counts_are_the_cores_and_refuse_a_set_of_another_corpus(
    sample_corpus, embedder, sample_store, base_settings, tmp_path
):
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    options = base_settings.with_(collection="TestSample").options()
    path = str(REPO_ROOT / "eval_sets" / "sample-ops-issue-titles.yaml")
    counts = eval_counts((path,), options, "TestSample", services)
    assert counts == eval_feature_counts([load_eval_set(path)], services, options)
    assert eval_counts((path,), options, "TestSample", services) == counts
    other = tmp_path / "other.yaml"
    other.write_text("name: other\ncases:\n- id: a\n  query: VirtAPIDown\n  expected: [virt-control-plane/VirtAPIDown]\n")
    with pytest.raises(TrafficError) as err:
        eval_counts((str(other),), options, "TestSample", services)
    assert str(other) in str(err.value) and "collection TestSample" in str(err.value)
