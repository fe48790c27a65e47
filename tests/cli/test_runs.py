"""`runs` and `compare` as a user runs them: the settings file is `--config`, compare's eval configuration
`--eval-config`; the old spellings (`--settings FILE`, `compare --config NAME`) still work, with a notice."""

from __future__ import annotations

from retrieval.config import child_environment, load_settings
from retrieval.lab.runs import RunStore

from ..helpers.cli import cli
from ..helpers.lab import saved_at


def _settings_file(tmp_path):
    path = tmp_path / "lookup.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n", encoding="utf-8")
    return path


def test_runs_takes_the_settings_file_as_config_and_still_as_settings(tmp_path):
    config = _settings_file(tmp_path)
    new = cli("runs", "--config", str(config))
    assert (new.returncode, new.stdout.strip(), new.stderr) == (0, "no saved runs", "")
    old = cli("runs", "--settings", str(config))
    assert (old.returncode, old.stdout.strip()) == (0, "no saved runs")
    assert old.stderr.strip() == "note: --settings is now --config"


def test_compare_takes_the_eval_configuration_as_eval_config_and_still_as_config(tmp_path):
    settings = load_settings(env=child_environment(), config_file=None, data_dir=tmp_path / "data")
    store = RunStore(settings.invocation_db)
    a = saved_at(store, 1, {"c1": 1, "c2": 3}, settings).run_id
    b = saved_at(store, 2, {"c1": 1, "c2": 1}, settings).run_id
    config = _settings_file(tmp_path)

    new = cli("compare", a, b, "--eval-config", "lookup", "--config", str(config))
    assert new.returncode == 0 and "configuration lookup" in new.stdout and new.stderr == "", new.stderr
    old = cli("compare", a, b, "--config", "lookup", "--settings", str(config))
    assert old.returncode == 0 and old.stdout == new.stdout, old.stderr
    assert old.stderr.splitlines() == [
        "note: compare --config lookup is now --eval-config lookup (--config names the settings file)",
        "note: --settings is now --config",
    ]
    missing = cli("compare", a, b, "--config", "l0_only", env={"LOOKUP_DATA_DIR": str(tmp_path / "data")})
    assert missing.returncode == 2 and "configuration 'l0_only' is not in run " in missing.stderr  # the configuration
