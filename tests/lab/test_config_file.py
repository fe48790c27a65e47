"""Writing chosen settings to lookup.yaml: the diff first, other lines kept, read back by load_settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.config import load_settings
from retrieval.errors import ConfigError
from retrieval.lab.config_file import config_path, plan_config, write_config


def test_config_path_is_the_file_load_settings_reads():
    assert config_path({}) == Path("lookup.yaml")
    assert config_path({"LOOKUP_CONFIG": "/etc/kb.yaml"}) == Path("/etc/kb.yaml")


def test_without_a_file_the_diff_is_against_the_defaults(tmp_path):
    path = tmp_path / "lookup.yaml"
    plan = plan_config(path, {"vector_weight": 2.0, "l0_weight": 0.0, "search_mode": "hybrid"}, env={})
    # l0_weight 0.0 is the default already: not written
    assert [(c.name, c.before, c.after, c.source) for c in plan.changes] == [
        ("vector_weight", 2.5, 2.0, "default"),
        ("search_mode", "fusion", "hybrid", "default"),
    ]
    assert not plan.exists and plan.diff.startswith("--- /dev/null\n")
    assert "+vector_weight: 2.0\n" in plan.diff and "+search_mode: hybrid\n" in plan.diff and "l0_weight" not in plan.diff
    write_config(plan)
    settings = load_settings(config_file=path, env={})
    assert (settings.vector_weight, settings.search_mode, settings.l0_weight) == (2.0, "hybrid", 0.0)
    assert plan_config(path, {"vector_weight": 2.0, "search_mode": "hybrid"}, env={}).changes == ()


def test_an_existing_file_keeps_its_other_lines(tmp_path):
    path = tmp_path / "lookup.yaml"
    original = "# tuned by hand\ncorpus_dir: sample_corpus\nvector_weight: 3  # from the last sweep\ntop_k: 7\n"
    path.write_text(original)
    plan = plan_config(path, {"vector_weight": 1.5, "top_k": 7, "l0_weight": 0.2}, env={"LOOKUP_L0_WEIGHT": "0.1"})
    assert [(c.name, c.before, c.source) for c in plan.changes] == [
        ("vector_weight", 3, "lookup.yaml"),
        ("l0_weight", 0.0, "default"),
    ]
    assert plan.overridden_by_env == ("LOOKUP_L0_WEIGHT",)
    assert "-vector_weight: 3  # from the last sweep\n+vector_weight: 1.5\n" in plan.diff and "+l0_weight: 0.2\n" in plan.diff
    write_config(plan)
    assert path.read_text() == "# tuned by hand\ncorpus_dir: sample_corpus\nvector_weight: 1.5\ntop_k: 7\nl0_weight: 0.2\n"


def test_a_file_changed_since_the_diff_is_not_overwritten(tmp_path):
    path = tmp_path / "lookup.yaml"
    path.write_text("top_k: 5\n")
    plan = plan_config(path, {"top_k": 9}, env={})
    path.write_text("top_k: 6\n")
    with pytest.raises(ConfigError, match="changed since the diff"):
        write_config(plan)
    assert path.read_text() == "top_k: 6\n"


@pytest.mark.parametrize(
    "text, chosen, named",
    [
        ("top_k: [1\n", {"top_k": 3}, "not valid YAML"),
        ("- 1\n- 2\n", {"top_k": 3}, "expected a mapping"),
        ("top_k: 5\n", {"no_such_setting": 3}, "no_such_setting: not a setting"),
        ("{top_k: 5}\n", {"top_k": 3}, "cannot set top_k by editing its line"),  # a flow mapping: no line of its own
    ],
)
def test_refusals_name_the_file_or_setting(tmp_path, text, chosen, named):
    path = tmp_path / "lookup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=named):
        plan_config(path, chosen, env={})
