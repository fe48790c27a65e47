"""Settings sweeps: the queries a point needs, a hand-checked tiny sweep, and a sweep on the sample sets whose
re-ranked figures equal a direct eval run (run_eval's `lookup`) at the same settings, on the real Weaviate."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest

from retrieval.config import REPO_ROOT, Settings
from retrieval.core.candidates import Candidate
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.errors import LookupLabError
from retrieval.evals.catalog import EvalSetFile, eval_set_files
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.evals.tuning import parse_grid, stratified_folds
from retrieval.lab.sweep import check_folds, cv_for, fitting_eval_sets, run_sweep, sweep_sets
from retrieval.lab.sweep_signals import CaseSignals, QueryKey, keys_for, query_keys
from retrieval.store import indexing

ALERTS = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"
UNANSWERABLE = REPO_ROOT / "eval_sets" / "sample-ops-unanswerable.yaml"
TITLES = REPO_ROOT / "eval_sets" / "sample-ops-issue-titles.yaml"
CANDIDATE_DEPTH = Settings().candidate_depth
NV, BM = QueryKey("near_vector", CANDIDATE_DEPTH), QueryKey("bm25", CANDIDATE_DEPTH)


@pytest.mark.parametrize(
    "changes, keys",
    [
        ({}, (NV, BM)),
        ({"search_mode": "near_vector"}, (NV,)),
        ({"search_mode": "hybrid", "hybrid_alpha": 0.3}, (QueryKey("hybrid", CANDIDATE_DEPTH, 0.3),)),
        ({"top_k": 3}, (NV, BM)),  # an eval looks at 10 and fetches CANDIDATE_DEPTH candidates whatever top_k below that
        ({"top_k": 30}, (QueryKey("near_vector", 30), QueryKey("bm25", 30))),
        ({"vector_weight": 1, "l0_weight": 0.5, "support_threshold": 0.5}, (NV, BM)),  # re-ranking only
    ],
)
def test_query_keys_per_settings(changes, keys):
    assert query_keys(Settings().with_(**changes)) == keys


def test_a_grid_asks_weaviate_once_per_distinct_query_setting():
    current = Settings()
    assert keys_for(parse_grid("vector_weight=1,2,3;l0_weight=0,0.1,0.2"), current) == (NV, BM)
    keys = keys_for(parse_grid("search_mode=near_vector,hybrid;hybrid_alpha=0.25,0.75;l0_weight=0,0.2"), current)
    assert keys == (NV, BM, QueryKey("hybrid", CANDIDATE_DEPTH, 0.25), QueryKey("hybrid", CANDIDATE_DEPTH, 0.75))


def cand(entry_id, score, similarity=0.5):
    return Candidate(entry_id, entry_id, "d", None, score, 0, "", similarity)


def case(set_name, i, right_by):
    """The right entry R first in the vector list or in the lexical list, second in the other; R's similarity
    0.9 (a clear support estimate), the wrong entry W's 0.5. 'none': unanswerable, the signals
    disagree."""
    if right_by == "vector":
        vector, lexical = [cand("R", 1.0, 0.9), cand("W", 0.9)], [cand("W", 10.0), cand("R", 9.0, 0.9)]
    elif right_by == "lexical":
        vector, lexical = [cand("W", 1.0), cand("R", 0.9, 0.9)], [cand("R", 10.0, 0.9), cand("W", 9.0)]
    else:
        vector, lexical = [cand("W", 1.0)], [cand("X", 10.0)]
    relevant = frozenset() if right_by == "none" else frozenset({"R"})
    return CaseSignals(set_name, f"{set_name}{right_by}{i}", relevant, (), {NV: tuple(vector), BM: tuple(lexical)})


def test_a_tiny_sweep_by_hand():
    signals = (
        [case("a", i, "vector") for i in range(9)]
        + [case("b", i, "vector") for i in range(6)]
        + [case("b", i, "lexical") for i in range(4)]
        + [case("b", 0, "none")]
    )
    current = Settings(vector_weight=0.5, lexical_weight=1.0)
    result = run_sweep(signals, parse_grid("vector_weight=0.5,2"), current, cv="kfold", folds=3, repeats=1, seed=11)
    low, high = result.points
    # vector weight 0.5: W wins the vector cases (0.45 + 1 > 0.5 + 0.9), R the lexical ones
    assert low.metrics["mrr@10"] == pytest.approx((0.5 + (6 * 0.5 + 4) / 10) / 2)
    # vector weight 2: R wins the vector cases (2 + 0.9 > 1.8 + 1), W the lexical ones
    assert high.metrics["mrr@10"] == pytest.approx((1.0 + (6 + 4 * 0.5) / 10) / 2)
    assert high.metrics["hit@1"] == pytest.approx((1.0 + 0.6) / 2)
    assert high.metrics["recall@5"] == 1.0
    assert high.metrics["correct_supported_rate"] == pytest.approx((1.0 + 0.6) / 2)  # R on top at 0.9: supported
    assert high.metrics["unanswerable_unsupported_rate"] == 1.0  # set b's one unanswerable case; set a has none
    assert high.per_set == {"a": 1.0, "b": pytest.approx(0.8)}
    assert result.sets == {"a": {"cases": 9, "answerable": 9, "corpus": ""}, "b": {"cases": 11, "answerable": 10, "corpus": ""}}
    # the best, and the current settings (= the first point) against it over the 19 answerable cases
    best = result.best
    assert best.point is high and best.to_dict()["settings"] == {"vector_weight": 2.0}
    assert result.current.metrics == low.metrics and result.current.settings == {"vector_weight": 0.5}
    diffs = np.array([0.5] * 15 + [-0.5] * 4)
    assert best.vs_current["cases"] == 19 and best.vs_current["delta"] == pytest.approx(diffs.mean())
    from scipy import stats

    assert best.vs_current["p_value"] == pytest.approx(stats.ttest_1samp(diffs, 0).pvalue)
    # CV: weight 2 wins every training split (set a alone gives it 0.25 of macro lead; set b cannot take that
    # back), so each held-out fold scores weight 2's macro mrr@10 on that fold's rows
    groups = np.array([s.set_name for s in signals if s.relevant])
    fold_of = stratified_folds(groups, 3, random.Random(11))
    rr_b = np.array([1.0] * 6 + [0.5] * 4)
    expected = [(1.0 + rr_b[fold_of[9:] == f].mean()) / 2 for f in range(3)]
    assert best.cv.picks == (1, 1, 1)
    assert best.cv.held_out == pytest.approx(tuple(expected))
    assert best.to_dict()["cv_mean"] == pytest.approx(np.mean(expected))
    assert best.to_dict()["cv_sd"] == pytest.approx(np.std(expected, ddof=1))
    assert best.to_dict()["chosen"] == [{"settings": {"vector_weight": 2.0}, "times": 3}]
    assert result.validation.method == "kfold" and "stratified 1×3-fold" in result.validation.label


def test_leave_one_set_out_by_hand_with_a_set_that_wants_other_settings():
    """Set a wants the vector first, set c the lexical list first: each chosen without the other loses it."""
    signals = [case("a", i, "vector") for i in range(6)] + [case("c", i, "lexical") for i in range(4)]
    signals += [case("u", 0, "none")]
    current = Settings(vector_weight=0.5, lexical_weight=1.0)
    result = run_sweep(signals, parse_grid("vector_weight=0.5,2"), current)  # two answerable sets: leave one out
    assert result.validation.method == "sets" and result.best.cv is None
    low, high = result.points
    assert low.per_set == {"a": 0.5, "c": 1.0} and high.per_set == {"a": 1.0, "c": 0.5}
    rows = {r.set_name: r for r in result.validation.by_set.rows}
    # a held out: chosen on c alone -> weight 0.5 (point 0), 0.5 on a; c held out: chosen on a -> 2, 0.5 on c
    assert rows["a"].chosen == 0 and rows["a"].held_out["mrr@10"] == 0.5 and rows["a"].trained_on == ("c",)
    assert rows["c"].chosen == 1 and rows["c"].held_out["mrr@10"] == 0.5
    # in-sample both points tie at 0.75: the tie goes to the current weight (0.5), so a's gap is 0, c's 0.5
    assert result.best.index == 0 and rows["a"].gap == 0.0 and rows["c"].gap == pytest.approx(0.5)
    assert rows["c"].loses and not rows["a"].loses  # c chosen without: 0.5 against the current 1.0
    # the unanswerable case (its BM25F candidate scores 10 for an empty query: the estimate claims support) is scored by
    # the point chosen on both answerable sets: its promise is the share left unsupported, none of one
    assert rows["u"].held_out["promise"] == 0.0 and rows["u"].chosen == 0 and rows["u"].trained_on == ("a", "c")
    assert result.validation.by_corpus is None  # one corpus
    assert high.below_current == ("c",) and low.below_current == ()
    data = json.loads(json.dumps(result.to_dict()))
    block = data["validation"]["leave_one_set_out"]
    assert block["worst_set"] in {"a", "c"} and block["mean_mrr@10"] == pytest.approx(0.5)
    assert block["rows"][0]["chosen"] == {"vector_weight": 0.5} and data["best"]["held_out_mean"] == pytest.approx(0.5)
    by_worst = run_sweep(signals, parse_grid("vector_weight=0.5,2"), current, choose="worst")
    assert by_worst.validation.rule == "worst"
    with pytest.raises(LookupLabError, match="--cv 'folds'"):
        run_sweep(signals, parse_grid("vector_weight=0.5,2"), current, cv="folds")
    with pytest.raises(LookupLabError, match="at least two eval sets"):
        run_sweep(signals[:6], parse_grid("vector_weight=0.5,2"), current, cv="sets")


def test_leave_one_corpus_out_holds_out_every_set_of_a_corpus():
    signals = [replace(case("a", i, "vector"), corpus="x") for i in range(6)]
    signals += [replace(case("b", i, "vector"), corpus="x") for i in range(3)]
    signals += [replace(case("c", i, "lexical"), corpus="y") for i in range(4)]
    result = run_sweep(signals, parse_grid("vector_weight=0.5,2"), Settings(vector_weight=0.5))
    block = result.validation.by_corpus
    assert block is not None and {(r.fold, r.set_name) for r in block.rows} == {("x", "a"), ("x", "b"), ("y", "c")}
    rows = {r.set_name: r for r in block.rows}
    assert rows["a"].trained_on == ("c",) and rows["a"].chosen == 0 and rows["c"].chosen == 1
    assert result.sets["c"]["corpus"] == "y"


def test_a_tie_goes_to_the_point_closest_to_the_current_settings():
    signals = [case("a", i, "vector") for i in range(6)]
    # alpha does not matter in fusion mode: both alphas tie; the current one (0.5) is kept, though 0.25 comes first
    result = run_sweep(signals, parse_grid("vector_weight=0.5,2;hybrid_alpha=0.25,0.5"), Settings(), folds=2, repeats=1)
    assert result.best.point.settings == {"vector_weight": 2.0, "hybrid_alpha": 0.5}
    assert [settings for settings, _ in result.best.chosen] == [{"vector_weight": 2.0, "hybrid_alpha": 0.5}]  # in CV too
    assert result.best.vs_current["p_value"] == 1.0  # the same rankings as the current settings (vector weight 3)


def test_check_folds_refuses_before_any_query():
    alerts, unanswerable, titles = load_eval_set(ALERTS), load_eval_set(UNANSWERABLE), load_eval_set(TITLES)
    check_folds([alerts, unanswerable], 5, 1)
    check_folds([alerts, titles], 99, 1)  # leave-one-set-out: the folds do not apply
    assert cv_for([alerts, unanswerable], None) == "kfold" and cv_for([alerts, titles, unanswerable], None) == "sets"
    with pytest.raises(LookupLabError, match="at least two eval sets"):
        check_folds([alerts, unanswerable], 5, 1, "sets")
    with pytest.raises(LookupLabError, match="--cv 'styles'"):
        check_folds([alerts, titles], 5, 1, "styles")
    with pytest.raises(LookupLabError, match="answerable cases"):
        check_folds([unanswerable], 5, 1)
    with pytest.raises(LookupLabError, match="only 48 answerable"):
        check_folds([alerts], 49, 1)
    with pytest.raises(LookupLabError, match="at least 2 folds"):
        check_folds([alerts], 1, 1)


def test_fitting_eval_sets_keep_those_of_the_loaded_corpus(sample_corpus, tmp_path):
    known = [e.entry_id for e in sample_corpus.entries]
    files = eval_set_files()
    picked = {f.label for f in fitting_eval_sets(files, known, sample_corpus.root)}
    assert {"eval_sets/sample-ops-alerts.yaml", "eval_sets/sample-ops-unanswerable.yaml"} <= picked
    assert "eval_sets/sample-ops-issue-titles.yaml" in picked
    assert not [label for label in picked if label.startswith("shared/")]  # the shared sets expect other entries
    other = tmp_path / "other.yaml"
    other.write_text("name: other\ncorpus: elsewhere\ncases:\n  - {id: a, query: nothing here, expected: []}\n")
    assert fitting_eval_sets([EvalSetFile("tmp/other.yaml", other)], known, sample_corpus.root) == []


@pytest.fixture(scope="module")
def sample_services(sample_corpus, sample_store, embedder):
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)


@pytest.mark.slow  # about a minute on 2 busy cores: four direct eval runs beside the sweep
def test_a_sweep_on_the_sample_sets_agrees_with_direct_eval_runs(sample_services, base_settings):
    settings = base_settings.with_(collection="TestSample")
    alerts, unanswerable = load_eval_set(ALERTS), load_eval_set(UNANSWERABLE)
    grid = parse_grid("search_mode=fusion,hybrid;l0_weight=0,0.2", settings)
    seen = []
    result = sweep_sets(
        [alerts, unanswerable], sample_services, settings, grid, folds=3, repeats=2, progress=lambda *a: seen.append(a)
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert [p["settings"] for p in data["points"]] == grid.points()
    for p in data["points"]:
        assert {"mrr@10", "hit@1", "recall@5", "correct_supported_rate", "unanswerable_unsupported_rate"} <= set(p)
        assert set(p["per_set"]) == {"sample-ops-alerts"}  # only sets with answerable cases
    best = data["best"]
    assert best["settings"] in grid.points() and 0 < best["cv_mean"] <= 1 and best["cv_sd"] >= 0
    assert best["in_sample"] == max(p["mrr@10"] for p in data["points"])
    assert best["vs_current"]["cases"] == 48 and best["p_value"] == best["vs_current"]["p_value"]
    assert len(best["cv"]["held_out"]) == 6 and sum(c["times"] for c in best["chosen"]) == 6
    assert data["current"]["settings"] == {"search_mode": "fusion", "l0_weight": 0.0}
    assert data["queries_per_case"] == 3 and data["sets"]["sample-ops-unanswerable"]["answerable"] == 0
    assert seen[-1] == ("grid points", 4, 4) and any(s[0].startswith("Weaviate queries") for s in seen)
    # the cached path agrees with the real lookup: a fusion point re-ranked, a hybrid point from its own query
    for point in ({"search_mode": "fusion", "l0_weight": 0.2}, {"search_mode": "hybrid", "l0_weight": 0.0}):
        swept = data["points"][grid.points().index(point)]
        direct = run_eval(alerts, sample_services, settings.with_(**point), configs=["lookup"])
        for metric in ("mrr@10", "hit@1", "recall@5"):
            assert swept[metric] == pytest.approx(direct.metrics["lookup"][metric]), (point, metric)
        assert swept["correct_supported_rate"] == pytest.approx(direct.routing["lookup"]["correct_supported_rate"])
    # the current settings, and the unanswerable set's support figure
    direct = run_eval(unanswerable, sample_services, settings, configs=["lookup"])
    assert data["current"]["unanswerable_unsupported_rate"] == pytest.approx(
        direct.routing["lookup"]["unanswerable_unsupported_rate"]
    )


@pytest.mark.slow  # direct eval runs beside the sweep, on the real Weaviate
def test_leave_one_set_out_on_the_sample_styles_agrees_with_direct_eval_runs(sample_services, base_settings):
    """The two sample styles (alert texts, issue titles) and the unanswerable set: each set's held-out figure is a
    direct eval run of the point chosen on the other sets."""
    settings = base_settings.with_(collection="TestSample")
    sets = [load_eval_set(p) for p in (ALERTS, TITLES, UNANSWERABLE)]
    grid = parse_grid("vector_weight=1,2.5;missing_score=zero,last", settings)
    result = sweep_sets(sets, sample_services, settings, grid)
    assert result.validation.method == "sets" and result.validation.by_corpus is None  # one corpus
    rows = {r.set_name: r for r in result.validation.by_set.rows}
    assert set(rows) == {"sample-ops-alerts", "sample-ops-issue-titles", "sample-ops-unanswerable"}
    assert rows["sample-ops-alerts"].trained_on == ("sample-ops-issue-titles",)
    for eval_set in sets:
        row = rows[eval_set.name]
        chosen = grid.points()[row.chosen]
        direct = run_eval(eval_set, sample_services, settings.with_(**chosen), configs=["lookup"])
        if row.answerable:
            assert row.held_out["mrr@10"] == pytest.approx(direct.metrics["lookup"]["mrr@10"]), (eval_set.name, chosen)
            assert row.held_out["hit@1"] == pytest.approx(direct.metrics["lookup"]["hit@1"])
            right_supported, hit1 = direct.routing["lookup"]["correct_supported_rate"], direct.metrics["lookup"]["hit@1"]
            assert row.held_out["promise"] == pytest.approx(right_supported / hit1)
        else:
            assert row.held_out["promise"] == pytest.approx(direct.routing["lookup"]["unanswerable_unsupported_rate"])
    from retrieval.lab.sweep_report import summary

    text = summary(json.loads(json.dumps(result.to_dict())), {"signals": 1.0, "points": 1.0})
    assert "leave one set out, choosing by the mean set" in text and "sample-ops-issue-titles" in text


@pytest.mark.parametrize(
    "args, named",
    [
        (["sweep", str(ALERTS), "--grid", "search_mode=fusion;colour=red"], "'colour' is not a setting a sweep can vary"),
        (["sweep", str(ALERTS), "--grid", "hybrid_alpha=0.5,2"], "hybrid_alpha: 2.0 is not between 0 and 1"),
        (["tune", str(ALERTS), "--grid", "top_k=0"], "top_k: 0 must be at least 1"),
        (["sweep", str(UNANSWERABLE), "--grid", "l0_weight=0,0.1"], "needs answerable cases"),
        (["sweep", str(ALERTS), "--grid", "l0_weight=0,0.1", "--folds", "1"], "at least 2 folds"),
    ],
)
def test_the_cli_refuses_before_starting_anything(args, named, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from retrieval.cli import app

    monkeypatch.setenv("LOOKUP_CONFIG", str(tmp_path / "none.yaml"))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and named in result.output


def test_the_embedding_model_is_a_sweep_dimension_with_its_own_queries():
    keys = keys_for(parse_grid("embedding_model=bge-small-en-v1.5,all-MiniLM-L6-v2"), Settings())
    m = "all-MiniLM-L6-v2"
    assert keys == (NV, BM, QueryKey("near_vector", CANDIDATE_DEPTH, model=m), QueryKey("bm25", CANDIDATE_DEPTH, model=m))
    # signals of the two models: bge ranks R first in both lists, MiniLM ranks W first in both
    mk = {m: (QueryKey("near_vector", CANDIDATE_DEPTH, model=m), QueryKey("bm25", CANDIDATE_DEPTH, model=m)) for m in MODELS2}
    signals = []
    for i in range(10):
        found = {}
        for model, (nv, bm) in mk.items():
            first, second = ("R", "W") if model == "bge-small-en-v1.5" else ("W", "R")
            found[nv] = (cand(first, 1.0, 0.9), cand(second, 0.5))
            found[bm] = (cand(first, 10.0, 0.9), cand(second, 5.0))
        signals.append(CaseSignals("a", f"c{i}", frozenset({"R"}), (), found))
    result = run_sweep(signals, parse_grid("embedding_model=bge-small-en-v1.5,all-MiniLM-L6-v2"), Settings(), folds=2, repeats=1)
    by_model = {p.settings["embedding_model"]: p.metrics["mrr@10"] for p in result.points}
    assert by_model == {"bge-small-en-v1.5": 1.0, "all-MiniLM-L6-v2": 0.5}
    assert result.best.point.settings == {"embedding_model": "bge-small-en-v1.5"}


MODELS2 = ("bge-small-en-v1.5", "all-MiniLM-L6-v2")


@pytest.mark.slow  # indexes the sample corpus a second time, with MiniLM
def test_a_sweep_over_models_searches_each_model_s_collection(sample_services, sample_corpus, weaviate_client, base_settings):
    from retrieval.store.embedding import Embedder
    from retrieval.store.weaviate_store import KnowledgeStore

    settings = base_settings.with_(collection="TestSample")
    minilm = Embedder("all-MiniLM-L6-v2")
    store = KnowledgeStore(weaviate_client, "TestSampleMinilm")
    store.drop()
    try:
        indexing.ingest(store, sample_corpus, minilm)
        other = LookupServices(L0Index(sample_corpus.entries), minilm, store)
        alerts = load_eval_set(ALERTS)
        grid = parse_grid("embedding_model=bge-small-en-v1.5,all-MiniLM-L6-v2", settings)
        result = sweep_sets(
            [alerts], sample_services, settings, grid, folds=2, repeats=1, other_models={"all-MiniLM-L6-v2": other}
        )
        assert result.queries == 4  # near_vector and BM25F in each model's collection
        for point in result.points:
            model = point.settings["embedding_model"]
            use = sample_services if model == "bge-small-en-v1.5" else other
            direct = run_eval(alerts, use, settings.with_(embedding_model=model, collection=use.store.name), configs=["lookup"])
            assert point.metrics["mrr@10"] == pytest.approx(direct.metrics["lookup"]["mrr@10"]), model
            assert point.metrics["correct_supported_rate"] == pytest.approx(direct.routing["lookup"]["correct_supported_rate"])
        with pytest.raises(LookupLabError, match="no collection of that model"):
            sweep_sets([alerts], sample_services, settings, grid, folds=2, repeats=1)
    finally:
        store.drop()


@pytest.mark.slow  # the CLI indexes the sample corpus in both models' collections of the session's Weaviate
def test_the_sweep_cli_varies_the_model_over_each_model_s_collection(base_settings, weaviate_client, tmp_path):
    from ..helpers.cli import cli

    env = {
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
        "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
    }
    try:
        args = ["sweep", str(ALERTS), "--grid", "model=bge-small-en-v1.5,all-MiniLM-L6-v2", "--folds", "2", "--repeats", "1"]
        out = cli(*args, "--json", env=env, timeout=900)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [p["settings"]["embedding_model"] for p in data["points"]] == ["bge-small-en-v1.5", "all-MiniLM-L6-v2"]
        assert data["queries_per_case"] == 4 and all(0 < p["mrr@10"] <= 1 for p in data["points"])
        assert weaviate_client.collections.exists("Kb_sample_corpus_minilm")  # each model has its own collection
    finally:
        for name in ("Kb_sample_corpus_bge_small", "Kb_sample_corpus_minilm"):
            if weaviate_client.collections.exists(name):
                weaviate_client.collections.delete(name)
