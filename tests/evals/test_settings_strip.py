"""The settings strip: the settings a run ranks and claims support with, as name=value, following the mode."""

from __future__ import annotations

from retrieval.config import Settings
from retrieval.core.support import support_model
from retrieval.evals.settings_strip import config_meaning, strip_items, strip_text, value_text


def names(settings) -> list[str]:
    return [name for name, _ in strip_items(settings)]


def test_each_mode_shows_the_settings_it_ranks_with():
    base = Settings()
    fusion = names(base.with_(search_mode="fusion"))
    near = names(base.with_(search_mode="near_vector"))
    hybrid = names(base.with_(search_mode="hybrid"))
    assert fusion[:2] == ["embedding_model", "search_mode"] and fusion[-2:] == ["top_k", "support_threshold"]
    assert "lexical_weight" in fusion and "lexical_weight" not in near and "lexical_weight" not in hybrid
    assert "hybrid_alpha" in hybrid and "hybrid_alpha" not in fusion and "hybrid_alpha" not in near
    assert {"vector_weight", "l0_weight", "name_weight", "candidate_depth"} <= set(near)


def test_values_read_as_written_and_a_fitted_threshold_says_so():
    settings = Settings().with_(vector_weight=2.5, l0_weight=0.0, top_k=7, support_threshold=None)
    items = dict(strip_items(settings))
    assert items["vector_weight"] == "2.5" and items["l0_weight"] == "0" and items["top_k"] == "7"
    fitted = support_model(settings.embedding_model).cut(None)
    assert items["support_threshold"] == f"{value_text(fitted)} (fitted)"
    assert dict(strip_items(settings.with_(support_threshold=0.6)))["support_threshold"] == "0.6"
    assert strip_text(settings).startswith(f"embedding_model={settings.embedding_model} · search_mode=fusion · ")


def test_a_saved_runs_settings_missing_some_names_show_the_ones_it_has():
    saved = {"embedding_model": "bge-small-en-v1.5", "search_mode": "near_vector", "top_k": 10}
    assert strip_items(saved) == [
        ("embedding_model", "bge-small-en-v1.5"),
        ("search_mode", "near_vector"),
        ("top_k", "10"),
    ]
    assert strip_text({}) == "–"


def test_the_lookup_configuration_is_named_for_the_mode():
    base = Settings()
    assert "BM25F" in config_meaning("lookup", base.with_(search_mode="fusion"))
    assert "vector query, fused with L0" in config_meaning("lookup", base.with_(search_mode="near_vector"))
    assert "hybrid" in config_meaning("lookup", {"search_mode": "hybrid"})
    assert "fusion" not in config_meaning("lookup", base.with_(search_mode="near_vector"))
    assert config_meaning("l0_only", base) == "the L0 keyword matches alone"


def test_an_evals_depth_is_explained_only_when_it_is_not_the_sidebars():
    from retrieval.evals.settings_strip import depth_note

    assert depth_note(10, 10) is None
    note = depth_note(10, 5)
    assert note is not None and note.startswith("top_k=10 here, 5 in the sidebar") and "MRR@10" in note
    assert "missing_score" in names(Settings()) and "missing_score" in names(Settings().with_(search_mode="hybrid"))
