"""Cross-validated tuning: grid parsing, the CV bookkeeping on hand-made signals, and signals from a real run."""

from __future__ import annotations

import pytest

from retrieval.errors import EvalSetError
from retrieval.eval_sets import load_eval_set
from retrieval.hints import L0Index
from retrieval.lookup import LookupServices
from retrieval.tuning import CaseSignals, collect_signals, cross_validate, parse_grid, reciprocal_ranks
from retrieval.weaviate_store import Candidate

from .conftest import SAMPLE_CORPUS


def test_parse_grid_makes_every_combination():
    assert parse_grid("vector_weight=0.5,1;l0_weight=0") == [
        {"vector_weight": 0.5, "l0_weight": 0.0},
        {"vector_weight": 1.0, "l0_weight": 0.0},
    ]


@pytest.mark.parametrize(
    "text, named", [("", "empty"), ("top_k=1,2", "top_k"), ("l0_weight=a", "l0_weight"), ("l0_weight=-1", "l0_weight")]
)
def test_parse_grid_refuses_by_name(text, named):
    with pytest.raises(EvalSetError, match=named):
        parse_grid(text)


def cand(entry_id, score):
    return Candidate(entry_id, entry_id, "d", None, score, 0, "", 0.5)


def case(set_name, i, right_by):
    """A case whose right entry 'R' is first in the vector list or the lexical list, and second in the other."""
    if right_by == "vector":
        vector, lexical = [cand("R", 1.0), cand("W", 0.9)], [cand("W", 10.0), cand("R", 9.0)]
    else:
        vector, lexical = [cand("W", 1.0), cand("R", 0.9)], [cand("R", 10.0), cand("W", 9.0)]
    return CaseSignals(set_name, f"{set_name}{i}", frozenset({"R"}), (), tuple(vector), tuple(lexical))


def test_cross_validation_picks_the_weights_the_data_favour(base_settings):
    # set a: 9 cases the vector gets right; set b: 6 cases the vector, 4 the lexical list gets right
    signals = (
        [case("a", i, "vector") for i in range(9)]
        + [case("b", i, "vector") for i in range(6)]
        + [case("b", 10 + i, "lexical") for i in range(4)]
    )
    grid = parse_grid("vector_weight=0.5,2")
    rr = reciprocal_ranks(signals, grid[1], base_settings)
    assert rr.tolist() == [1.0] * 15 + [0.5] * 4  # vector first: the lexical-only cases drop to rank 2
    result = cross_validate(signals, grid, base_settings, folds=3, repeats=2)
    assert result["best"]["settings"] == {"vector_weight": 2.0}
    assert result["best"]["in_sample"] == pytest.approx((1.0 + (6 + 4 * 0.5) / 10) / 2)
    assert result["cv"]["held_out_mean"] <= 1.0 and sum(c["times"] for c in result["cv"]["chosen"]) == 6
    assert result["cases"] == {"a": 9, "b": 10}
    with pytest.raises(EvalSetError, match="folds"):
        cross_validate(signals, grid, base_settings, folds=1)


def test_signals_of_a_real_run_reproduce_the_lookup(sample_corpus, sample_store, embedder, base_settings):
    from retrieval.lookup import lookup_knowledge

    eval_set = load_eval_set(SAMPLE_CORPUS.parent / "eval_sets" / "sample-ops-alerts.yaml")
    settings = base_settings.with_(collection="TestSample", top_k=10)
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    signals = collect_signals(eval_set, services, settings)
    assert len(signals) == sum(c.answerable for c in eval_set.cases)
    first = signals[0]
    looked_up = lookup_knowledge(eval_set.case(first.case_id).query, services, settings)
    rr = reciprocal_ranks([first], {}, settings)[0]
    rank = next((i for i, r in enumerate(looked_up.results, 1) if r.entry_id in first.expected), None)
    assert rr == (0.0 if rank is None else 1.0 / rank)
    assert [c.entry_id for c in first.vector] == [c.entry_id for c in looked_up.l1.candidates]
