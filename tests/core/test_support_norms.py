import math

import pytest

from retrieval.core.support_norms import Baseline, SupportNorms, fit_baseline, fit_norms
from retrieval.errors import ConfigError


def test_a_baseline_is_a_line_over_the_log_of_the_query_s_words():
    b = fit_baseline([0.0, 1.0, 2.0], [0.70, 0.72, 0.74])
    assert b.intercept == pytest.approx(0.70) and b.slope == pytest.approx(0.02)
    assert b.at(math.log(10)) == pytest.approx(0.70 + 0.02 * math.log(10))
    assert fit_baseline([1.0, 1.0], [0.6, 0.8]) == Baseline(pytest.approx(0.7), 0.0)  # one length: flat
    with pytest.raises(ValueError):
        fit_baseline([], [])


def test_norms_are_fitted_on_removed_runs_and_read_back():
    rows = [(math.log(n), {"similarity": 0.7 + 0.01 * math.log(n), "lexical_per_word": 2.0}) for n in (2, 5, 10, 40)]
    norms = fit_norms(rows, fitted_on="test")
    assert norms.kind == "self" and norms.probes == 4 and norms.fitted_on == "test"
    assert norms.expected("similarity").slope == pytest.approx(0.01)
    assert norms.expected("lexical_per_word").at(3.0) == pytest.approx(2.0)
    again = SupportNorms.from_dict(norms.to_dict())
    assert again == norms and again.fit_id == norms.fit_id and len(norms.fit_id) == 12
    other = fit_norms([(x, {**v, "similarity": v["similarity"] + 0.05}) for x, v in rows])
    assert other.fit_id != norms.fit_id
    assert norms.describe() == {"kind": "self", "id": norms.fit_id, "probes": 4}
    with pytest.raises(KeyError):
        norms.expected("margin")


@pytest.mark.parametrize(
    "data, wrong",
    [
        ([], "expected a mapping"),
        ({"baselines": {"similarity": [0.7, 0.0]}}, "must name exactly"),
        ({"baselines": {"similarity": [0.7], "lexical_per_word": [1.0, 0.0]}}, "baselines.similarity"),
        ({"baselines": {"similarity": ["a", 0], "lexical_per_word": [1.0, 0.0]}}, "baselines.similarity"),
    ],
)
def test_a_fit_that_cannot_be_read_names_its_source_and_field(data, wrong):
    with pytest.raises(ConfigError, match=wrong) as err:
        SupportNorms.from_dict(data, source="support fit of collection 'KbX'")
    assert "KbX" in str(err.value)
