import math

import numpy as np
import pytest

from retrieval.core.candidates import Candidate
from retrieval.core.support import (
    FEATURE_NAMES,
    MODEL_INPUTS,
    REFERENCE_NORMS,
    SUPPORT_MODELS,
    SupportFeatures,
    auc,
    features_of,
    fit,
    fit_calibration,
    model_inputs,
    query_words,
)
from retrieval.core.support_norms import Baseline, SupportNorms


def cand(entry_id, score, similarity=None):
    return Candidate(entry_id, entry_id, "d", None, score, 0, "", similarity)


def test_features_by_hand():
    vector = [cand("a/X", 0.80, 0.80), cand("a/Y", 0.70, 0.70)]
    lexical = [cand("a/Y", 12.0), cand("a/X", 6.0, 0.80)]
    f = features_of("a/X", 0.80, {"vector": 1, "bm25": 2}, [3.0, 2.5], vector, lexical, "Pod is crash looping, pod!")
    assert f.similarity == 0.80 and f.similarity_margin == pytest.approx(0.10)
    assert f.lexical_share == pytest.approx(0.5) and f.lexical_per_word == pytest.approx(6.0 / 4)  # pod is crash looping
    assert f.lexical_margin == pytest.approx(0.5) and (f.vector_rr, f.lexical_rr) == (1.0, 0.5)
    assert f.fused_margin == pytest.approx(0.5 / 3.0) and f.agreement == 0.0
    assert f.query_length == pytest.approx(math.log(4))
    assert list(f.to_dict()) == list(FEATURE_NAMES)


def test_features_do_not_grow_with_the_query_s_length():
    vector, lexical = [cand("a/X", 0.8, 0.8), cand("a/Y", 0.7, 0.7)], [cand("a/X", 9.0), cand("a/Y", 3.0)]
    short = features_of("a/X", 0.8, {"vector": 1, "bm25": 1}, [3.0, 1.0], vector, lexical, "disk full")
    longer = [replace_score(c, 3) for c in lexical]  # a query three times as long scores about three times higher
    long = features_of("a/X", 0.8, {"vector": 1, "bm25": 1}, [3.0, 1.0], vector, longer, "disk full on node and volume")
    assert long.lexical_per_word == pytest.approx(short.lexical_per_word)
    assert long.lexical_share == short.lexical_share and long.lexical_margin == short.lexical_margin


def replace_score(c, factor):
    from dataclasses import replace

    return replace(c, score=c.score * factor)


def test_query_words_counts_distinct_words():
    assert query_words("Disk disk FULL") == 2 and query_words("!!!") == 1


def test_auc_by_hand():
    assert auc([0.9, 0.8, 0.3, 0.1], [True, True, False, False]) == 1.0
    assert auc([0.1, 0.9], [True, False]) == 0.0
    assert auc([0.5, 0.5], [True, False]) == 0.5
    assert auc([0.5], [True]) is None


NORMS = SupportNorms((("similarity", Baseline(0.70, 0.02)), ("lexical_per_word", Baseline(2.0, -0.2))), "self", 40)


def feats(similarity=0.8, margin=0.05, lexical=2.0, agreement=1.0, words=6):
    values = dict.fromkeys(FEATURE_NAMES, 0.5)
    values.update(
        similarity=similarity,
        similarity_margin=margin,
        lexical_per_word=lexical,
        agreement=agreement,
        query_length=math.log(words),
    )
    return SupportFeatures(**values)


def test_model_inputs_read_similarity_and_bm25f_against_the_knowledge_base_s_baselines():
    f = feats(similarity=0.80, lexical=2.5, words=6)
    x = model_inputs(f, NORMS)
    length = math.log(6)
    assert len(x) == len(MODEL_INPUTS)
    assert x[0] == pytest.approx(0.80 - (0.70 + 0.02 * length))  # above what a sibling gets here
    assert x[1] == pytest.approx(0.05) and x[3] == 1.0 and x[4] == pytest.approx(length)
    assert x[2] == pytest.approx(2.5 - (2.0 - 0.2 * length))
    # the same similarity reads as weaker in a knowledge base whose siblings get more
    higher = SupportNorms((("similarity", Baseline(0.78, 0.02)), ("lexical_per_word", Baseline(2.0, -0.2))), "self", 40)
    assert model_inputs(f, higher)[0] < x[0]


def test_fit_learns_the_direction_of_a_separating_input():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, len(MODEL_INPUTS)))
    y = (x[:, 0] + 0.1 * rng.normal(size=200) > 0).astype(float)
    model = fit(x, y)
    assert model.weights[0] > 1.0 and abs(model.weights[0]) == max(abs(w) for w in model.weights)
    assert model.score(np.array([3.0, 0, 0, 0, 0])) > 0 > model.score(np.array([-3.0, 0, 0, 0, 0]))


def test_the_calibration_rescales_the_score_without_reordering_it():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=400) * 3  # overconfident: the outcome follows a third of the score
    y = (rng.random(400) < 1 / (1 + np.exp(-scores / 3))).astype(float)
    a, c = fit_calibration(scores, y)
    assert 0.2 < a < 0.6 and abs(c) < 0.3  # about a third, around zero
    with_it = SUPPORT_MODELS["bge-small-en-v1.5"]
    low, high = with_it.probability(feats(similarity=0.70), NORMS), with_it.probability(feats(similarity=0.90), NORMS)
    assert 0.0 < low < high < 1.0


def test_every_catalogued_model_has_a_fitted_support_estimate_and_reference_baselines():
    from retrieval.types.models import MODELS

    assert set(SUPPORT_MODELS) == set(MODELS) == set(REFERENCE_NORMS)
    for name, model in SUPPORT_MODELS.items():
        assert len(model.weights) == len(model.means) == len(model.scales) == len(MODEL_INPUTS)
        assert 0.0 < model.threshold < 1.0 and name in model.fitted_on
        assert model.weights[MODEL_INPUTS.index("similarity_vs_sibling")] > 0  # more similar: more likely right
        assert model.calibration[0] > 0  # the rescaling keeps the order
        assert REFERENCE_NORMS[name].kind == "reference"
