"""The eval runner on real data: the runbooks summaries over the runbooks corpus, in a real Weaviate."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from retrieval.config import REPO_ROOT, child_environment
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.errors import EvalSetError
from retrieval.evals.evaluation import CONFIGS, run_eval
from retrieval.evals.gates import check_gates, parse_threshold
from retrieval.evals.report import metrics_text, render_html
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore

from ..conftest import CHROMIUM, RUNBOOKS_EVAL, needs_chromium


@pytest.fixture(scope="module")
def runbooks_run(runbooks_corpus, runbooks_store, embedder, base_settings, tmp_path_factory):
    db = tmp_path_factory.mktemp("eval") / "inv.duckdb"
    recorder = InvocationStore(db)
    services = LookupServices(L0Index(runbooks_corpus.entries), embedder, runbooks_store, recorder)
    eval_set = load_eval_set(RUNBOOKS_EVAL, known_ids=[e.entry_id for e in runbooks_corpus.entries])
    settings = base_settings.with_(collection="TestRunbooks")
    report = run_eval(eval_set, services, settings)
    recorder.flush()
    yield eval_set, report, recorder, services, settings
    recorder.close()


def test_runbooks_summaries_all_four_configurations(runbooks_run):
    _, report, *_ = runbooks_run
    print("\n" + metrics_text(report))
    assert set(report.metrics) == set(CONFIGS)
    for metrics in report.metrics.values():
        assert set(metrics) == {"hit@1", "recall@5", "mrr@10", "ndcg@10"}
        assert all(0.0 <= v <= 1.0 for v in metrics.values())
    assert report.metrics["lookup"]["mrr@10"] > report.metrics["l1_unfiltered"]["mrr@10"]


def test_ranx_metrics_agree_with_the_per_case_ranks(runbooks_run):
    _, report, *_ = runbooks_run
    answerable = [c for c in report.to_dict()["cases"] if c["expected"]]
    for config in CONFIGS:
        rr = [c["configs"][config]["rr"] for c in answerable]
        hits = [c["configs"][config]["rank"] == 1 for c in answerable]
        assert report.metrics[config]["mrr@10"] == pytest.approx(sum(rr) / len(rr))
        assert report.metrics[config]["hit@1"] == pytest.approx(sum(hits) / len(hits))


def test_routing_metrics_and_significance_are_reported(runbooks_run):
    _, report, *_ = runbooks_run
    r = report.routing["l1_filtered"]
    assert 0 < r["filter_applied_rate"] <= 1 and 0 < r["routing_accuracy"] <= 1
    assert report.routing["l1_unfiltered"]["filter_applied_rate"] == 0.0
    assert report.confusion["kubernetes"].get("kubernetes", 0) > 0
    pairs = report.significance["pairs"]
    n = len(report.configs)
    assert report.significance["reference"] == "lookup" and report.significance["correction"] == "holm"
    assert len(pairs) == (n - 1) * 4 == report.significance["tests"]  # each configuration against lookup, four metrics
    assert all(p["b"] == "lookup" and p["a"] != "lookup" for p in pairs)
    assert all(p["p_value"] is None or 0.0 <= p["p_value"] <= p["p_holm"] <= 1.0 for p in pairs)
    assert all(p["significant"] == (p["p_holm"] is not None and p["p_holm"] < 0.05) for p in pairs)
    assert report.latency["lookup"]["l1_p50"] > 0 and report.latency["lookup"]["l1_p95"] >= report.latency["lookup"]["l1_p50"]


def test_every_lookup_of_the_run_is_recorded_with_its_tag(runbooks_run):
    eval_set, report, recorder, *_ = runbooks_run
    assert recorder.count(session_tag=report.run_tag) == len(eval_set.cases)


def test_json_shape(runbooks_run):
    _, report, *_ = runbooks_run
    data = json.loads(json.dumps(report.to_dict(), default=str))
    assert {"eval_set", "configs", "significance", "cases"} <= set(data)
    case = data["cases"][0]
    assert {"id", "query", "expected", "routing", "layer", "configs"} <= set(case)
    assert {"rank", "rr"} <= set(case["configs"]["lookup"])


def test_unanswerable_cases_report_support(runbooks_corpus, runbooks_store, embedder, base_settings):
    services = LookupServices(L0Index(runbooks_corpus.entries), embedder, runbooks_store, None)
    un = load_eval_set(RUNBOOKS_EVAL.with_name("runbooks-alert-summaries-unanswerable.yaml"))
    report = run_eval(un, services, base_settings.with_(collection="TestRunbooks"), configs=["lookup"])
    rate = report.routing["lookup"]["unanswerable_unsupported_rate"]
    print(f"\nunanswerable cases returned without semantic support: {rate:.3f}")
    assert rate is not None and 0.0 <= rate <= 1.0
    assert any("answerable cases" in w for w in report.warnings)  # 0 answerable: the small-sample warning


def test_gates_thresholds_and_baseline(runbooks_run):
    eval_set, report, *_ = runbooks_run
    measured = report.metrics["lookup"]["mrr@10"]
    assert check_gates(report, [f"lookup:mrr@10={measured - 0.01}"]) == []
    failed = check_gates(report, [f"lookup:mrr@10={measured + 0.01}"])
    assert len(failed) == 1 and "below the threshold" in failed[0]
    # A baseline whose rankings were perfect: the current run is significantly worse.
    better = copy.deepcopy(report.to_dict())
    for case in better["cases"]:
        for cfg in case["configs"].values():
            cfg["ranking"] = list(case["expected"]) + [e for e in cfg["ranking"] if e not in case["expected"]]
    regressions = check_gates(report, [], better, eval_set)
    assert any(r.startswith("lookup mrr@10 fell") for r in regressions)
    assert check_gates(report, [], report.to_dict(), eval_set) == []  # against itself: no regression


@pytest.mark.parametrize("bad", ["lookup-mrr@10=1", "lookup:mrr@11=0.5", "nope:mrr@10=0.5", "lookup:mrr@10=high"])
def test_bad_thresholds_are_named(bad):
    with pytest.raises(EvalSetError, match="--min"):
        parse_threshold(bad)


def test_html_report_is_self_contained(runbooks_run, tmp_path):
    _, report, *_ = runbooks_run
    page = render_html(report)
    assert "<svg" in page  # the charts are inline SVG: no chart library, no script
    body = page.split("<body>")[1].replace("xmlns='http://www.w3.org/2000/svg'", "")
    assert "<script" not in page and "http://" not in body and "https://" not in body  # nothing fetched
    assert "runbooks-alert-summaries" in page and "KubePodCrashLooping" in page
    (tmp_path / "report.html").write_text(page)


@pytest.mark.slow
def test_cli_gate_fails_above_and_passes_below(sample_store, base_settings, tmp_path):
    env = child_environment()
    env.update(
        {
            "LOOKUP_DATA_DIR": str(tmp_path / "data"),
            "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
            "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
            "LOOKUP_COLLECTION": "TestSample",
        }
    )
    eval_set = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"

    def run(*extra):
        return subprocess.run(
            [sys.executable, "-m", "retrieval", "eval", str(eval_set), "--configs", "l1_unfiltered,lookup", *extra],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    out = run("--json", "--report", str(tmp_path / "r.html"))
    assert out.returncode == 0, out.stderr
    measured = json.loads(out.stdout)["configs"]["lookup"]["mrr@10"]
    assert (tmp_path / "r.html").stat().st_size > 10_000
    above = run("--min", f"lookup:mrr@10={measured + 0.01:.4f}")
    assert above.returncode == 1 and "GATE FAILED" in above.stderr
    below = run("--min", f"lookup:mrr@10={measured - 0.01:.4f}")
    assert below.returncode == 0, below.stderr
    assert "lookup" in below.stdout and "mrr@10" in below.stdout


@pytest.mark.browser
def test_html_report_opens_in_the_browser(runbooks_run, tmp_path):
    """The exported report, opened from disk in Debian's chromium with no app and no network."""
    needs_chromium()
    from playwright.sync_api import sync_playwright

    _, report, *_ = runbooks_run
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    shots = REPO_ROOT / "test-artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(path.as_uri())
            page.wait_for_selector("svg.chart rect.bar", timeout=60_000)  # the chart drew its bars
            assert "Eval set runbooks-alert-summaries" in page.inner_text("h1")
            assert page.locator("table").count() >= 4
            assert errors == []
            page.screenshot(path=str(shots / "eval-report.png"), full_page=False)
        finally:
            browser.close()


def test_support_points_sort_cases_by_outcome(runbooks_run):
    from retrieval.evals.evaluation import support_points

    _, report, *_ = runbooks_run
    points = support_points(report)
    assert len(points) == len(report.cases)
    by_case = {c["id"]: c for c in report.to_dict()["cases"]}
    for p in points:
        rank = by_case[p["case"]]["configs"]["lookup"]["rank"]
        assert p["outcome"] == ("right" if rank == 1 else "wrong")
        assert p["support_score"] is None or -1.0 <= p["support_score"] <= 1.0
    right = sum(p["outcome"] == "right" and p["semantic_support"] for p in points) / len(points)
    assert right == pytest.approx(report.routing["lookup"]["correct_supported_rate"])
    # support is claimed at the threshold of the estimate, or for an entry the query names in full
    threshold = report.settings["support_threshold"]
    assert report.settings["embedding_model"] == "bge-small-en-v1.5" and 0 < threshold < 1
    named = {c["id"]: c for c in report.to_dict()["cases"]}
    for p in points:
        assert p["confidence"] is not None and 0.0 <= p["confidence"] <= 1.0
        if p["confidence"] >= threshold:
            assert p["semantic_support"], p
        elif p["semantic_support"]:  # below the threshold: only a named entry
            assert named[p["case"]]["configs"]["lookup"]["ranking"][0].split("/")[-1] in named[p["case"]]["query"], p
    auc = report.routing["lookup"]["support_auc"]
    assert auc is None or 0.5 < auc <= 1.0


def test_the_json_carries_the_support_estimate_s_calibration(runbooks_run):
    _, report, *_ = runbooks_run
    data = json.loads(json.dumps(report.to_dict(), default=str))
    cal = data["calibration"]["lookup"]
    confidences = [c["configs"]["lookup"]["confidence"] for c in data["cases"]]
    assert all(p is not None for p in confidences) and cal["cases"] == cal["estimated_cases"] == len(confidences)
    assert cal["predicted_hit1"] == pytest.approx(sum(confidences) / len(confidences), abs=1e-3)
    assert cal["hit1"] == pytest.approx(report.metrics["lookup"]["hit@1"], abs=1e-4)
    assert sum(b["count"] for b in cal["bins"]) == len(confidences)
    right = [c["configs"]["lookup"]["rank"] == 1 for c in data["cases"]]
    ece = 0.0
    for b in cal["bins"]:  # the error recomputed from the cases, bin by bin
        inside = [
            (p, ok) for p, ok in zip(confidences, right, strict=True) if b["low"] <= p < b["high"] or (p == 1.0 == b["high"])
        ]
        assert len(inside) == b["count"]
        ece += (
            len(inside)
            / len(confidences)
            * abs(sum(p for p, _ in inside) / len(inside) - sum(ok for _, ok in inside) / len(inside))
        )
    assert cal["ece"] == pytest.approx(ece, abs=1e-3)
    # which fit gave the estimates: this collection has no fit of its own here, so the reference baselines
    assert cal["fit"]["baselines"]["kind"] == "reference" and "bge-small-en-v1.5" in cal["fit"]["model"]
    assert "l0_only" not in data["calibration"]  # L0 alone has no estimate


def test_a_run_without_lookup_names_its_reference_even_without_answers(sample_corpus, base_settings):
    """L0 alone on the unanswerable sample set: no test runs, but the JSON still names the reference the legend reads."""
    from retrieval.evals.report import significance_legend

    services = LookupServices(L0Index(sample_corpus.entries), None, None, None)
    un = load_eval_set(REPO_ROOT / "eval_sets" / "sample-ops-unanswerable.yaml")
    report = run_eval(un, services, base_settings, configs=["l0_only"])
    assert report.significance.get("reference") == "l0_only", report.significance
    assert "than l0_only (the reference)" in significance_legend(report)
