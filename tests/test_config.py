from dataclasses import fields
from pathlib import Path

import pytest

from retrieval.config import (
    ENV_NAMES,
    ENV_OF,
    EVAL_SETTINGS,
    NOT_QUALITY,
    QUALITY_SETTINGS,
    SECRET_SETTINGS,
    SERVER_TOKEN_ENV,
    SETTING_DEFAULTS,
    Settings,
    child_environment,
    config_path,
    corpus_from_environment,
    eval_set_corpus,
    load_settings,
    server_token,
    set_by_environment,
)
from retrieval.errors import ConfigError


def test_env_overrides_yaml_and_defaults(tmp_path):
    cfg = tmp_path / "lookup.yaml"
    cfg.write_text("top_k: 7\ncollection: FromYaml\nl1_enabled: true\n")
    s = load_settings(
        config_file=cfg,
        env={"LOOKUP_COLLECTION": "FromEnv", "LOOKUP_L1_ENABLED": "false", "LOOKUP_DB_PATH": str(tmp_path / "x.duckdb")},
    )
    assert (s.top_k, s.collection, s.l1_enabled) == (7, "FromEnv", False)
    assert s.invocation_db == tmp_path / "x.duckdb"


def test_defaults_without_file_or_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    assert s == Settings()
    assert s.invocation_db == s.data_dir / "invocations.duckdb"


@pytest.mark.parametrize(
    "env, needle",
    [
        ({"LOOKUP_L1_ENABLED": "maybe"}, "LOOKUP_L1_ENABLED"),
        ({"LOOKUP_TOP_K": "ten"}, "LOOKUP_TOP_K"),
        ({"LOOKUP_TOP_K": "0"}, "top_k"),
        ({"LOOKUP_SEARCH_MODE": "bm25"}, "search_mode"),
        ({"LOOKUP_HYBRID_ALPHA": "1.5"}, "hybrid_alpha"),
        ({"LOOKUP_CANDIDATE_DEPTH": "0"}, "candidate_depth: 0 is not between 1 and 200"),
        ({"LOOKUP_CANDIDATE_DEPTH": "deep"}, "LOOKUP_CANDIDATE_DEPTH"),
        ({"LOOKUP_MISSING_SCORE": "half"}, "missing_score: 'half' is not one of bm25_last, last, zero"),
    ],
)
def test_bad_values_name_the_setting(env, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=needle):
        load_settings(env=env)


def test_bad_config_file_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("top_k: [1\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        load_settings(config_file=bad, env={})
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("colection: X\n")
    with pytest.raises(ConfigError, match="unknown setting 'colection'"):
        load_settings(config_file=unknown, env={})
    with pytest.raises(ConfigError, match="not found"):
        load_settings(config_file=tmp_path / "missing.yaml", env={})


def test_api_key_is_not_in_repr():
    s = Settings(weaviate_api_key="sekret-123")
    assert "sekret-123" not in repr(s)


@pytest.mark.parametrize(
    "value, read_only", [("true", True), ("1", True), ("yes", True), ("false", False), ("off", False), ("", None)]
)
def test_read_only_setting(value, read_only, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings(env={"LOOKUP_READ_ONLY": value}).read_only is read_only
    assert load_settings(env={}).read_only is None  # unset: the app decides from the address it binds


def test_bad_read_only_value_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"LOOKUP_READ_ONLY.*'maybe'"):
        load_settings(env={"LOOKUP_READ_ONLY": "maybe"})
    (tmp_path / "lookup.yaml").write_text("read_only: sometimes\n")
    with pytest.raises(ConfigError, match="read_only"):
        load_settings(env={})


def test_the_embedding_model_is_a_setting_and_brings_its_own_collection(tmp_path):
    s = load_settings(env={"LOOKUP_EMBEDDING_MODEL": "all-minilm-l6-v2", "LOOKUP_CORPUS_DIR": str(tmp_path / "runbooks")})
    assert (s.embedding_model, s.collection) == ("all-MiniLM-L6-v2", "Kb_runbooks_minilm")  # the catalogue's spelling
    assert s.with_(embedding_model="e5-small-v2").collection == "Kb_runbooks_e5_small"
    assert s.with_(collection="Mine").with_(embedding_model="e5-small-v2").collection == "Mine"  # a chosen one stays
    cfg = tmp_path / "lookup.yaml"
    cfg.write_text("embedding_model: e5-small-v2\nsupport_threshold: 0.4\n")
    from_yaml = load_settings(config_file=cfg, env={})
    assert (from_yaml.embedding_model, from_yaml.support_threshold) == ("e5-small-v2", 0.4)


@pytest.mark.parametrize(
    "env, needle",
    [
        ({"LOOKUP_EMBEDDING_MODEL": "gpt-17"}, "embedding_model: 'gpt-17' is not one of bge-small-en-v1.5"),
        ({"LOOKUP_SUPPORT_THRESHOLD": "1.5"}, "support_threshold: 1.5 is not between 0 and 1"),
        ({"LOOKUP_SUPPORT_THRESHOLD": "high"}, "LOOKUP_SUPPORT_THRESHOLD"),
    ],
)
def test_bad_model_and_threshold_values_name_the_setting(env, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=needle):
        load_settings(env=env)


# --- where a value comes from: the environment is read in config alone -------------------------------------
@pytest.mark.parametrize(
    "explicit, named, env, corpus",
    [
        (None, Path("kb/sets"), {}, Path("kb/sets")),  # the folder the eval set names
        (None, Path("kb/sets"), {"LOOKUP_CORPUS_DIR": "/srv/kb"}, None),  # None: load_settings takes the variable
        (None, Path("kb/sets"), {"LOOKUP_CORPUS_DIR": ""}, Path("kb/sets")),  # empty counts as unset
        (Path("mine"), Path("kb/sets"), {"LOOKUP_CORPUS_DIR": "/srv/kb"}, Path("mine")),  # --corpus wins
        (None, None, {}, None),  # the set names none
    ],
)
def test_the_corpus_an_eval_set_runs_on(explicit, named, env, corpus):
    assert eval_set_corpus(explicit, named, env) == corpus
    assert corpus_from_environment(env) is bool(env.get("LOOKUP_CORPUS_DIR"))


def test_what_the_environment_sets_is_named_by_its_variable():
    env = {"LOOKUP_L0_WEIGHT": "0.1", "LOOKUP_SERVER_TOKEN": "", "LOOKUP_CONFIG": "/etc/kb.yaml"}
    assert set_by_environment("l0_weight", env) == "LOOKUP_L0_WEIGHT"
    assert set_by_environment("vector_weight", env) is None
    assert set_by_environment("weaviate_version", env) is None  # no variable sets it
    assert config_path(env) == Path("/etc/kb.yaml") and config_path({}) == Path("lookup.yaml")
    assert server_token(env) is None and server_token({"LOOKUP_SERVER_TOKEN": "t" * 20}) == "t" * 20
    assert all(ENV_NAMES[ENV_OF[name]] == name for name in ENV_OF)


def test_a_child_process_gets_only_the_settings_it_is_given_and_reads_them_back_the_same(tmp_path):
    parent = {"PATH": "/bin", "LOOKUP_L0_WEIGHT": "0.4", "LOOKUP_SERVER_TOKEN": "secret-of-the-parent"}
    assert child_environment(env=parent) == {"PATH": "/bin"}
    assert child_environment(env=parent, LOOKUP_DATA_DIR="d") == {"PATH": "/bin", "LOOKUP_DATA_DIR": "d"}
    settings = load_settings(env={}, config_file=None, corpus_dir=tmp_path / "kb", read_only=True, l0_weight=0.25)
    child = child_environment(settings, env=parent, LOOKUP_DB_PATH=str(tmp_path / "own.duckdb"))
    assert "LOOKUP_SERVER_TOKEN" not in child and child["LOOKUP_READ_ONLY"] == "true"
    assert all(name in ENV_NAMES or name == "PATH" for name in child)
    again = load_settings(env=child, config_file=None)
    assert again.with_(db_path=None) == settings.with_(db_path=None)
    assert again.db_path == tmp_path / "own.duckdb"


def test_the_server_token_variable_is_the_one_serve_names():
    from retrieval.serve.serving import TOKEN_ENV

    assert TOKEN_ENV == SERVER_TOKEN_ENV


# --- which settings are retrieval quality ------------------------------------------------------------------
def test_quality_settings_are_the_fields_not_excluded_in_field_order():
    names = [f.name for f in fields(Settings)]
    assert set(names) >= NOT_QUALITY  # a renamed field is not silently counted as quality
    assert list(QUALITY_SETTINGS) == [n for n in names if n not in NOT_QUALITY]
    # a new field lands here unless NOT_QUALITY names it: runs, replays and the sweep will show and use it
    assert QUALITY_SETTINGS == (
        "embedding_model",
        "l1_enabled",
        "search_mode",
        "hybrid_alpha",
        "top_k",
        "candidate_depth",
        "vector_weight",
        "lexical_weight",
        "l0_weight",
        "name_weight",
        "missing_score",
        "support_threshold",
    )
    assert tuple(n for n in QUALITY_SETTINGS if n != "l1_enabled") == EVAL_SETTINGS
    assert SECRET_SETTINGS == ("weaviate_api_key",)
    assert list(SETTING_DEFAULTS) == names and SETTING_DEFAULTS["top_k"] == Settings().top_k


# --- vector compression ---------------------------------------------------------------------------------------
def test_vector_compression_is_a_setting_of_the_collection(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings().vector_compression == "rq"
    assert load_settings(env={"LOOKUP_VECTOR_COMPRESSION": " PQ "}).vector_compression == "pq"
    assert "vector_compression" in NOT_QUALITY  # fixed when the collection is made: no sweep varies it


@pytest.mark.parametrize("value", ["zstd", "int8", ""])
def test_a_bad_vector_compression_names_the_variable_and_the_choices(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"LOOKUP_VECTOR_COMPRESSION"):
        load_settings(env={"LOOKUP_VECTOR_COMPRESSION": value})
    if value:
        with pytest.raises(ConfigError, match=rf"'{value}' is not one of none, rq, pq, bq, sq"):
            load_settings(env={"LOOKUP_VECTOR_COMPRESSION": value})
