import pytest

from retrieval.core.support import FEATURE_NAMES, SupportFeatures
from retrieval.errors import LookupLabError
from retrieval.lab.calibration import CaseSupport, calibrate, claims, fit_model, promises

from ..helpers.cli import cli


def feats(sim, margin):
    values = dict.fromkeys(FEATURE_NAMES, 0.5)
    values.update(similarity=sim, similarity_margin=margin)
    return SupportFeatures(**values)


def cases():
    """Set 'a' answerable: right answers are similar and clear of the next entry, wrong ones are not; set 'u'
    unanswerable: faint neighbours only. One wrong answer named in full: claimed whatever the estimate."""
    out = []
    for i in range(20):
        out.append(CaseSupport("a", f"r{i}", True, True, False, feats(0.80 + i * 0.005, 0.05 + i * 0.002)))
    for i in range(8):
        out.append(CaseSupport("a", f"w{i}", True, False, i == 0, feats(0.62 + i * 0.005, -0.02)))
    for i in range(15):
        out.append(CaseSupport("u", f"u{i}", False, False, False, feats(0.55 + i * 0.01, -0.03 + i * 0.002)))
    return out


def test_promises_by_hand():
    c = cases()
    claimed = [x.right for x in c]  # claim exactly the right answers
    assert promises(c, claimed) == {"a": 1.0, "u": 1.0}
    claimed_all = [True] * len(c)
    assert promises(c, claimed_all) == {"a": 1.0, "u": 0.0}


def test_fit_model_keeps_both_promises_when_they_can_be_kept():
    c = cases()
    model = fit_model(c, fitted_on="hand")
    got = promises(c, claims(model, c))
    assert got["a"] >= 0.9 and got["u"] >= 0.85, got
    assert model.fitted_on == "hand" and 0.0 < model.threshold < 1.0
    assert claims(model, c)[c.index(next(x for x in c if x.named))]  # named: claimed


def test_calibrate_reports_in_sample_and_held_out_figures():
    result = calibrate(cases(), folds=4)
    assert result.in_sample["auc"] > 0.95 and result.held_out["auc"] > 0.9
    assert set(result.held_out["promises"]) == {"a", "u"}
    assert result.to_dict()["model"]["threshold"] == pytest.approx(result.model.threshold, abs=1e-3)


@pytest.mark.slow  # a real calibration run through the CLI on the sample sets
def test_the_calibrate_cli_fits_on_answerable_and_unanswerable_sets(cli_env):
    import json

    from retrieval.config import REPO_ROOT

    names = ("sample-ops-alerts", "sample-ops-issue-titles", "sample-ops-unanswerable")
    sets = [str(REPO_ROOT / "eval_sets" / f"{n}.yaml") for n in names]
    out = cli("calibrate", *sets, "--json", env=cli_env, timeout=900)  # three sets: each held out in turn
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    removed = {f"{n} (answer removed)" for n in names[:2]}  # the answerable sets, with their answers taken out
    assert data["cv"] == "sets" and set(data["in_sample"]["promises"]) == set(names) | removed
    assert 0.5 < data["in_sample"]["auc"] <= 1.0 and data["held_out"]["auc"] is not None
    assert set(data["held_out"]["promises"]) == set(names) | removed and data["held_out"]["not_scored"] == []
    sample = data["in_sample"]["reliability_per_corpus"]["sample_corpus"]
    assert sample["cases"] == 82 and 0 <= sample["ece"] <= 1 and data["baselines"]["sample_corpus"]["kind"] == "self"
    assert data["held_out_corpora"] is None  # one corpus: nothing to hold out by corpus
    assert 0 < data["model"]["threshold"] < 1 and "bge-small-en-v1.5" in data["model"]["fitted_on"]
    folds = cli("calibrate", sets[0], sets[2], "--cv", "kfold", "--folds", "3", "--json", env=cli_env, timeout=900)
    assert folds.returncode == 0, folds.stderr
    assert json.loads(folds.stdout)["cv"] == "kfold" and json.loads(folds.stdout)["held_out"]["auc"] is not None
    text = cli("calibrate", *sets, env=cli_env, timeout=900)
    assert text.returncode == 0 and "each set fitted without it" in text.stdout and "sample-ops-issue-titles" in text.stdout
    assert "predicted / hit@1 / ECE" in text.stdout and "corpus sample_corpus" in text.stdout
    refused = cli("calibrate", sets[2], env=cli_env)
    assert refused.returncode == 2 and "only right or only wrong" in refused.stderr
    none = cli("calibrate", env=cli_env)
    assert none.returncode == 2 and "--self" in none.stderr


@pytest.mark.slow  # probes the sample corpus through the CLI twice
def test_calibrate_self_fits_the_knowledge_base_s_baselines_and_keeps_them(cli_env):
    import json

    from retrieval.config import load_settings
    from retrieval.engine.server import connect
    from retrieval.store.factory import knowledge_store
    from retrieval.store.support_fit import read_fit

    out = cli("calibrate", "--self", "--json", env=cli_env, timeout=900)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kept"] and data["norms"]["kind"] == "self" and data["probes"] >= 48 * 3
    assert set(data["styles"]) == {"title", "sentence", "paragraph", "keywords"}
    assert 0.0 <= data["styles"]["sentence"]["removed_unsupported"] <= 1.0 and data["seconds"] > 0
    settings = load_settings(env={**cli_env}, config_file=None)
    client = connect(settings)
    try:
        stored = read_fit(knowledge_store(client, settings))
    finally:
        client.close()
    assert stored is not None and stored.norms.fit_id == data["fit"]["id"]
    measured = cli("calibrate", "--self", "--keep-title", env=cli_env, timeout=900)
    assert measured.returncode == 0, measured.stderr
    assert "measured only, not kept" in measured.stdout and "L1 query pairs" in measured.stdout
    client = connect(settings)
    try:
        assert read_fit(knowledge_store(client, settings)).norms.fit_id == data["fit"]["id"]  # --keep-title kept nothing
    finally:
        client.close()


def test_leave_one_set_out_scores_each_set_with_a_model_fitted_without_it():
    from dataclasses import replace

    c = cases() + [replace(x, set_name="b", case_id="b" + x.case_id, corpus="y") for x in cases() if x.set_name == "a"]
    result = calibrate(c, cv="sets")
    assert result.cv == "sets" and set(result.held_out["promises"]) == {"a", "b", "u"}
    for name in ("a", "b", "u"):
        held = [x for x in c if x.set_name == name]
        model = fit_model([x for x in c if x.set_name != name])
        assert result.held_out["promises"][name] == pytest.approx(promises(held, claims(model, held))[name]), name
    # and by corpus: set b is corpus y, a and u corpus "" (the default)
    assert result.held_out_corpora is not None and set(result.held_out_corpora["promises"]) == {"a", "b", "u"}
    model = fit_model([x for x in c if x.corpus != "y"])
    b = [x for x in c if x.corpus == "y"]
    assert result.held_out_corpora["promises"]["b"] == pytest.approx(promises(b, claims(model, b))["b"])
    assert result.to_dict()["cv"] == "sets" and result.held_out["not_scored"] == []


def test_a_fold_with_only_right_answers_to_learn_from_is_named_not_scored():
    # set a holds only right answers, u only wrong ones: without either, the other gives one kind of answer alone
    c = [x for x in cases() if x.set_name == "u" or x.right]
    result = calibrate(c, cv="sets")
    assert result.held_out["not_scored"] == ["a", "u"] and result.held_out["promises"] == {}
    assert set(result.in_sample["promises"]) == {"a", "u"}  # in-sample both kinds are there
    with pytest.raises(LookupLabError, match="--cv 'styles'"):
        calibrate(c, cv="styles")


def _signals(settings):
    """Two answerable cases and one unanswerable, by hand, with candidates as deep as a calibration reads them."""
    from retrieval.core.candidates import Candidate
    from retrieval.lab.calibration import signal_keys
    from retrieval.lab.sweep_signals import CaseSignals

    vec_key, bm_key = signal_keys(settings)

    def lists(first, sims):
        vec = tuple(Candidate(f"d/{e}", e, "d", None, s, 1, "", s) for e, s in zip(first, sims, strict=True))
        pairs = enumerate(zip(first, sims, strict=True))
        bm = tuple(Candidate(f"d/{e}", e, "d", None, 10.0 - i, 0, "", s) for i, (e, s) in pairs)
        return {vec_key: vec, bm_key: bm}

    names = [f"E{i}" for i in range(vec_key.depth)]
    sims = [0.90 - 0.01 * i for i in range(vec_key.depth)]
    return [
        CaseSignals("a", "c1", frozenset({"d/E0"}), (), lists(names, sims), "disk full on the primary", "k"),
        CaseSignals("a", "c2", frozenset({"d/E0", "d/E1"}), (), lists(names, sims), "disk full", "k"),
        CaseSignals("u", "c3", frozenset(), (), lists(names, sims), "bread with rye", "k"),
    ]


def test_each_answerable_case_serves_again_with_its_answer_removed(base_settings):
    from retrieval.lab.calibration import ANSWER_REMOVED, DEEPER, case_support, signal_keys
    from retrieval.lab.sweep_signals import query_keys

    assert [k.depth for k in signal_keys(base_settings)] == [k.depth + DEEPER for k in query_keys(base_settings)]
    got = case_support(_signals(base_settings), base_settings)
    assert [(c.set_name, c.case_id, c.answerable, c.right, c.derived) for c in got] == [
        ("a", "c1", True, True, False),
        ("a" + ANSWER_REMOVED, "c1", False, False, True),
        ("a", "c2", True, True, False),
        ("a" + ANSWER_REMOVED, "c2", False, False, True),
        ("u", "c3", False, False, False),
    ]
    c1, c1_removed, _, c2_removed, _ = got
    assert c1.features.similarity == pytest.approx(0.90)
    assert c1_removed.features.similarity == pytest.approx(0.89)  # its nearest sibling came first
    assert c2_removed.features.similarity == pytest.approx(0.88)  # both expected entries gone
    assert c1_removed.source_set == "a" and c1.source_set == "a"
    without = case_support(_signals(base_settings), base_settings, answer_removed=False)
    assert [c.derived for c in without] == [False, False, False]


def test_answer_removed_cases_hold_the_threshold_but_never_train_the_model():
    from dataclasses import replace

    from retrieval.lab.calibration import ANSWER_REMOVED, SIBLING_TARGET, target_of

    c = cases()
    # siblings: the wrong answers of set a, run again without their answer, as unanswerable ones
    derived = [
        replace(x, set_name="a" + ANSWER_REMOVED, answerable=False, right=False, derived=True, case_id="d" + x.case_id)
        for x in c
        if x.set_name == "a"
    ]
    plain, held = fit_model(c), fit_model(c + derived)
    assert (plain.intercept, plain.weights, plain.calibration) == (held.intercept, held.weights, held.calibration)
    assert target_of(derived[0]) == SIBLING_TARGET and target_of(c[0]) == 0.90 and target_of(c[-1]) == 0.85
    assert held.threshold >= plain.threshold  # the siblings can only raise the bar
    result = calibrate(c + derived, cv="kfold", folds=4)
    assert set(result.in_sample["promises"]) == set(result.held_out["promises"]) == {"a", "a" + ANSWER_REMOVED, "u"}
    assert result.in_sample["auc"] == calibrate(c, folds=4).in_sample["auc"]  # AUC over the sets' own cases only
    assert set(result.in_sample["reliability_per_set"]) == {"a", "u"}
