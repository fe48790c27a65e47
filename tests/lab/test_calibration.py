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
    assert data["cv"] == "sets" and set(data["in_sample"]["promises"]) == set(names)
    assert 0.5 < data["in_sample"]["auc"] <= 1.0 and data["held_out"]["auc"] is not None
    assert set(data["held_out"]["promises"]) == set(names) and data["held_out"]["not_scored"] == []
    assert data["held_out_corpora"] is None  # one corpus: nothing to hold out by corpus
    assert 0 < data["model"]["threshold"] < 1 and "bge-small-en-v1.5" in data["model"]["fitted_on"]
    folds = cli("calibrate", sets[0], sets[2], "--cv", "kfold", "--folds", "3", "--json", env=cli_env, timeout=900)
    assert folds.returncode == 0, folds.stderr
    assert json.loads(folds.stdout)["cv"] == "kfold" and json.loads(folds.stdout)["held_out"]["auc"] is not None
    text = cli("calibrate", *sets, env=cli_env, timeout=900)
    assert text.returncode == 0 and "each set fitted without it" in text.stdout and "sample-ops-issue-titles" in text.stdout
    refused = cli("calibrate", sets[2], env=cli_env)
    assert refused.returncode == 2 and "only right or only wrong" in refused.stderr


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
