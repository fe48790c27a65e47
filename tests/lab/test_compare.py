"""Comparing saved runs: a hand-checked four-case comparison in a real DuckDB file, and the CLI on two real
eval runs of the sample set (real Weaviate) with different settings."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from retrieval.cli.runs import comparison_text
from retrieval.config import REPO_ROOT, child_environment
from retrieval.errors import EvalSetError, RunNotFound
from retrieval.lab.compare import compare_runs, default_pair, paired_delta
from retrieval.lab.runs import RunStore

from ..helpers.lab import (
    forget_model,
    saved_at,
    tiny_report,
)

T_975_DF3 = 3.182446305284263  # Student's t, 97.5th percentile, 3 degrees of freedom (printed tables)


def t3_two_sided_p(t: float) -> float:
    """Two-sided p of Student's t with 3 degrees of freedom, from its closed-form CDF (no scipy):
    F(t) = 1/2 + (1/pi) * (u / (1 + u^2) + atan(u)), u = t / sqrt(3)."""
    u = abs(t) / math.sqrt(3)
    cdf = 0.5 + (u / (1 + u * u) + math.atan(u)) / math.pi
    return 2 * (1 - cdf)


def test_four_cases_with_known_ranks(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    report_a, set_a = tiny_report({"c1": 1, "c2": 2, "c3": 1, "c4": 4, "c5": 1})
    report_b, set_b = tiny_report({"c1": 1, "c2": 1, "c3": 3, "c4": 1})
    a = store.save(report_a, set_a, base_settings)
    b = store.save(report_b, set_b, base_settings.with_(vector_weight=1.0))
    cmp = compare_runs(store, a.run_id, b.run_id)
    data = cmp.to_dict()

    # reciprocal ranks A 1, 1/2, 1, 1/4 and B 1, 1, 1/3, 1 on the four shared answerable cases (c5 only in A, u1 unanswerable)
    diffs = np.array([0.0, 0.5, 1 / 3 - 1, 0.75])
    mean, sd = diffs.mean(), diffs.std(ddof=1)
    t = mean / (sd / 2)
    assert data["shared_cases"] == 4 and data["only_in_a"] == ["c5"] and data["only_in_b"] == []
    mrr = data["metrics"]["mrr@10"]
    assert mrr["a"] == pytest.approx(2.75 / 4) and mrr["b"] == pytest.approx((3 + 1 / 3) / 4)
    assert data["delta"] == pytest.approx((0.5 - 2 / 3 + 0.75) / 4) == mrr["b"] - mrr["a"]
    assert data["p_value"] == pytest.approx(t3_two_sided_p(t), rel=1e-9)
    assert data["effect_size"] == pytest.approx(mean / sd)
    assert mrr["ci95"] == pytest.approx([mean - T_975_DF3 * sd / 2, mean + T_975_DF3 * sd / 2])
    # hit@1: A 1,0,1,0 and B 1,1,0,1; recall@5: 1 everywhere, no variation, no test
    hit = data["metrics"]["hit@1"]
    assert (hit["a"], hit["b"], hit["delta"]) == (0.5, 0.75, 0.25)
    hit_diffs = np.array([0, 1, -1, 1])
    assert hit["p_value"] == pytest.approx(t3_two_sided_p(hit_diffs.mean() / (hit_diffs.std(ddof=1) / 2)), rel=1e-9)
    assert data["metrics"]["recall@5"]["delta"] == 0 and data["metrics"]["recall@5"]["p_value"] is None
    # which cases moved, with their ranks
    assert [(c["case_id"], c["rank_before"], c["rank_after"]) for c in data["improved"]] == [("c4", 4, 1), ("c2", 2, 1)]
    assert [(c["case_id"], c["rank_before"], c["rank_after"]) for c in data["regressed"]] == [("c3", 1, 3)]
    assert data["unchanged"] == 1
    assert data["warning"].startswith("only 4 shared cases")
    assert "changed between the runs" in " ".join(data["warnings"])  # c5 is gone: another content hash
    assert data["settings_diff"] == {"vector_weight": [base_settings.vector_weight, 1.0]}
    assert data["regression"] is False  # B is better; and four cases cannot show much


def test_a_consistent_drop_is_a_significant_regression(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    ids = [f"c{i}" for i in range(1, 9)]
    before = dict.fromkeys(ids, 1)
    after = dict(zip(ids, [2, 2, 3, 2, 4, 2, 2, 1], strict=True))
    a = store.save(*tiny_report(before), base_settings)
    b = store.save(*tiny_report(after), base_settings)
    cmp = compare_runs(store, a.run_id, b.run_id, metric="hit@1")
    assert cmp.chosen.delta == pytest.approx(-7 / 8) and cmp.chosen.significant and cmp.regression
    assert [c.case_id for c in cmp.regressed] == ids[:7] and cmp.improved == ()
    back = compare_runs(store, b.run_id, a.run_id, metric="hit@1")
    assert back.chosen.significant and not back.regression  # better the other way round


def test_paired_delta_edge_cases():
    same = paired_delta("mrr@10", np.array([1.0, 0.5]), np.array([1.0, 0.5]))
    assert (same.delta, same.p_value, same.effect_size, same.significant) == (0.0, None, None, False)
    one = paired_delta("mrr@10", np.array([0.5]), np.array([1.0]))
    assert one.delta == 0.5 and one.p_value is None


def test_unknown_run_configuration_or_metric_is_named(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    a = store.save(*tiny_report({"c1": 1}), base_settings)
    with pytest.raises(RunNotFound, match="'missing-run'"):
        compare_runs(store, a.run_id, "missing-run")
    with pytest.raises(EvalSetError, match="'bm25' is not in run"):
        compare_runs(store, a.run_id, a.run_id, config="bm25")
    with pytest.raises(EvalSetError, match="'mrr@3'"):
        compare_runs(store, a.run_id, a.run_id, metric="mrr@3")


def test_two_models_are_named_side_by_side_and_an_older_run_has_none(base_settings, tmp_path):
    db = tmp_path / "inv.duckdb"
    store = RunStore(db)
    bge = base_settings.with_(embedding_model="bge-small-en-v1.5")
    minilm = base_settings.with_(embedding_model="all-MiniLM-L6-v2")
    a = store.save(*tiny_report({"c1": 1, "c2": 2, "c3": 1}), bge)
    b = store.save(*tiny_report({"c1": 2, "c2": 1, "c3": 1}), minilm)
    cmp = compare_runs(store, a.run_id, b.run_id)
    assert cmp.models == ("bge-small-en-v1.5", "all-MiniLM-L6-v2")
    data = cmp.to_dict()
    assert data["embedding_models"] == ["bge-small-en-v1.5", "all-MiniLM-L6-v2"]
    assert (data["run_a"]["embedding_model"], data["run_b"]["embedding_model"]) == tuple(cmp.models)
    assert data["settings_diff"] == {
        "collection": ["Kb_sample_corpus_bge_small", "Kb_sample_corpus_minilm"],  # each model its own collection
        "embedding_model": ["bge-small-en-v1.5", "all-MiniLM-L6-v2"],
    }
    text = comparison_text(cmp)
    first = text.splitlines()[0]
    assert f"A {a.run_id} (tiny, bge-small-en-v1.5, 2026-12-01T10:00:00)" in first
    assert f"B {b.run_id} (tiny, all-MiniLM-L6-v2, 2026-12-01T10:00:00)" in first
    assert "embedding_model bge-small-en-v1.5 → all-MiniLM-L6-v2" in text

    forget_model(db, a.run_id)  # A as saved before the model was a setting
    old = compare_runs(store, a.run_id, b.run_id)
    assert old.models == (None, "all-MiniLM-L6-v2") and old.to_dict()["embedding_models"] == [None, "all-MiniLM-L6-v2"]
    text = comparison_text(old)
    assert f"A {a.run_id} (tiny, –, " in text and "embedding_model – → all-MiniLM-L6-v2" in text


def cli(*args, env, timeout=900):
    full_env = child_environment()
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.timeout(1800)  # nine CLI processes, each loading the model or the lab, on a shared 2-core machine
def test_cli_eval_saves_runs_that_runs_lists_and_compare_judges(tmp_path, base_settings, sample_store):
    env = {
        "LOOKUP_CONFIG": str(tmp_path / "no-lookup.yaml"),
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
        "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
        "LOOKUP_COLLECTION": "TestSample",
    }
    sample = str(REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml")
    first = cli("eval", sample, "--configs", "l0_only,lookup", "--json", env=env)
    assert first.returncode == 0, first.stderr
    run_a = json.loads(first.stdout)["run_id"]
    # B: the fusion ranks by L0 alone, a real and large step down
    second = cli(
        "eval", sample, "--configs", "lookup", "--vector-weight", "0", "--lexical-weight", "0", "--l0-weight", "1", env=env
    )
    assert second.returncode == 0, second.stderr
    run_b = next(line.split(": ", 1)[1] for line in second.stdout.splitlines() if line.startswith("run id: "))
    unsaved = cli("eval", sample, "--configs", "l0_only", "--json", "--no-save", env=env)
    assert unsaved.returncode == 0 and json.loads(unsaved.stdout)["run_id"] is None

    listed = json.loads(cli("runs", "--json", env=env).stdout)
    assert [r["run_id"] for r in listed] == [run_b, run_a]
    assert set(listed[0]) >= {"run_id", "set", "time", "settings", "metrics"}
    assert listed[0]["set"] == "sample-ops-alerts" and listed[0]["settings"]["l0_weight"] == 1.0
    assert [r["embedding_model"] for r in listed] == ["bge-small-en-v1.5"] * 2  # the default model, named
    assert set(listed[1]["metrics"]) == {"l0_only", "lookup"} and listed[1]["metrics"]["lookup"]["mrr@10"] > 0.5
    assert json.loads(cli("runs", "--set", "another-set", "--json", env=env).stdout) == []

    out = cli("compare", run_a, run_b, "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["shared_cases"] == 48 and data["config"] == "lookup" and data["warning"] is None
    assert set(data["metrics"]) == {"hit@1", "recall@5", "mrr@10", "ndcg@10"}
    mrr = data["metrics"]["mrr@10"]
    assert mrr["a"] == pytest.approx(listed[1]["metrics"]["lookup"]["mrr@10"])  # the run's own figure, from ranx
    assert mrr["b"] == pytest.approx(listed[0]["metrics"]["lookup"]["mrr@10"])
    assert data["delta"] < 0 and data["p_value"] < 0.05 and data["regression"] is True
    assert data["regressed"] and {"case_id", "rank_before", "rank_after"} <= set(data["regressed"][0])
    assert data["settings_diff"]["l0_weight"] == [0.0, 1.0]
    assert data["embedding_models"] == ["bge-small-en-v1.5"] * 2 and "embedding_model" not in data["settings_diff"]

    failed = cli("compare", run_a, run_b, "--fail-on-regression", env=env)
    assert failed.returncode == 1 and "REGRESSION" in failed.stderr and "mrr@10" in failed.stdout
    assert f"A {run_a} (sample-ops-alerts, bge-small-en-v1.5, " in failed.stdout
    assert cli("compare", run_b, run_a, "--fail-on-regression", env=env).returncode == 0  # better: passes
    unknown = cli("compare", run_a, "no-such-run", env=env)
    assert unknown.returncode == 2 and "'no-such-run'" in unknown.stderr
    missing = cli("compare", run_a, run_b, "--eval-config", "l0_only", env=env)
    assert missing.returncode == 2 and "'l0_only' is not in run " + run_b in missing.stderr


def test_a_run_is_not_compared_with_itself(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    a = store.save(*tiny_report({"c1": 1}), base_settings)
    with pytest.raises(EvalSetError, match=re.escape(f"run {a.run_id} is both A and B")):
        compare_runs(store, a.run_id, a.run_id)


def test_the_default_pair_is_the_two_latest_runs_of_one_set(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    assert default_pair(store.list_runs()) is None
    x1 = saved_at(store, 1, {"c1": 1}, base_settings)
    assert default_pair(store.list_runs()) is None  # one run: nothing to compare
    saved_at(store, 2, {"c1": 2}, base_settings, "other")
    assert default_pair(store.list_runs()) is None  # two runs of two sets share no case
    x2 = saved_at(store, 3, {"c1": 3}, base_settings)
    assert default_pair(store.list_runs()) == (x1.run_id, x2.run_id)
    x3 = saved_at(store, 4, {"c1": 4}, base_settings)
    saved_at(store, 5, {"c1": 1}, base_settings, "third")  # the newest, alone in its set
    assert default_pair(store.list_runs()) == (x2.run_id, x3.run_id)


def test_the_default_pair_is_the_newest_that_both_ran_the_configuration(base_settings, tmp_path):
    """A newest run without `lookup` is passed over when the pair is for `lookup`: the page opens on a comparable pair."""
    store = RunStore(tmp_path / "inv.duckdb")
    x1 = saved_at(store, 1, {"c1": 1}, base_settings)
    x2 = saved_at(store, 2, {"c1": 2}, base_settings)
    saved_at(store, 3, {"c1": 3}, base_settings, config="l0_only")  # the newest, without lookup
    runs = store.list_runs()
    assert default_pair(runs, "lookup") == (x1.run_id, x2.run_id)
    assert default_pair(runs, "l0_only") is None


def test_a_rank_that_is_not_there_reads_not_found():
    from retrieval.lab.compare import rank_text

    assert [rank_text(r) for r in (1, 7, None, float("nan"))] == ["1", "7", "not found", "not found"]


def _with_misses(report, causes: dict[str, str]):
    """The report with each named case's lookup miss set to the given cause."""
    cases = []
    for c in report.cases:
        data = c.to_dict()
        if c.id in causes:
            data["configs"]["lookup"]["miss"] = {"cause": causes[c.id], "entry_id": "e" + c.id[1:], "rank": 2}
        cases.append(data)
    return replace(report, cases=cases)


def test_saved_runs_keep_their_misses_causes_and_compare_says_what_moved(base_settings, tmp_path):
    store = RunStore(tmp_path / "inv.duckdb")
    report_a, set_a = tiny_report({"c1": 2, "c2": 2, "c3": 3, "c4": 1})
    report_b, set_b = tiny_report({"c1": 1, "c2": 2, "c3": 2, "c4": 1})
    a = store.save(
        _with_misses(report_a, {"c1": "lost_in_fusion", "c2": "lost_in_fusion", "c3": "lost_in_fusion"}), set_a, base_settings
    )
    b = store.save(_with_misses(report_b, {"c2": "kept_out_by_filter", "c3": "lost_in_fusion"}), set_b, base_settings)
    saved = store.cases(a.run_id, "lookup").set_index("case_id")["miss"]
    assert saved["c1"]["cause"] == "lost_in_fusion" and saved["c4"] is None
    cmp = compare_runs(store, a.run_id, b.run_id)
    assert cmp.causes_a == {"lost_in_fusion": 3} and cmp.causes_b == {"kept_out_by_filter": 1, "lost_in_fusion": 1}
    assert cmp.cause_changes == ["1 more kept out by the filter", "2 fewer in the lists, lost in the fusion"]
    assert cmp.to_dict()["causes"]["changes"] == cmp.cause_changes
