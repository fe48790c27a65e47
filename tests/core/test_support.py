import math

import numpy as np
import pytest

from retrieval.core.candidates import Candidate
from retrieval.core.support import FEATURE_NAMES, SUPPORT_MODELS, SupportFeatures, auc, features_of, fit, query_words


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


def test_fit_learns_the_direction_of_a_separating_feature():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, len(FEATURE_NAMES)))
    y = (x[:, 0] + 0.1 * rng.normal(size=200) > 0).astype(float)
    model = fit(x, y)
    assert model.weights[0] > 1.0 and abs(model.weights[0]) == max(abs(w) for w in model.weights)
    high = SupportFeatures(*([3.0] + [0.0] * (len(FEATURE_NAMES) - 1)))
    low = SupportFeatures(*([-3.0] + [0.0] * (len(FEATURE_NAMES) - 1)))
    assert model.probability(high) > 0.9 > 0.1 > model.probability(low)


def test_every_catalogued_model_has_a_fitted_support_estimate():
    from retrieval.types.models import MODELS

    assert set(SUPPORT_MODELS) == set(MODELS)
    for name, model in SUPPORT_MODELS.items():
        assert len(model.weights) == len(model.means) == len(model.scales) == len(FEATURE_NAMES)
        assert 0.0 < model.threshold < 1.0 and name in model.fitted_on
        assert model.weights[FEATURE_NAMES.index("similarity")] > 0  # more similar: more likely right
