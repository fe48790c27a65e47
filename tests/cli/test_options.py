"""The shared options: every command that reads the settings file names it `--config`, and none offers `--settings`."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import app
from retrieval.cli.options import CONFIG_HELP

NO_SETTINGS_FILE = {("models",), ("cluster", "stop")}  # the commands that read no settings file of the user's


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Each command below `group` (typer's own click), by its words: (("cluster", "start"), command), ..."""
    found = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


COMMANDS = _commands(typer.main.get_group(app))


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def _settings_options(command: Any) -> list[Any]:
    return [p for p in _options(command) if p.help == CONFIG_HELP]


def test_the_walk_sees_every_command():
    names = {path for path, _ in COMMANDS}
    assert {("lookup",), ("runs",), ("compare",), ("server", "start"), ("cluster", "status"), ("tune",)} <= names
    assert len(names) >= 20


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_each_command_names_the_settings_file_config(path, command):
    out = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "--settings" not in out.output
    spelt = [opt.opts for opt in _settings_options(command)]
    if path in NO_SETTINGS_FILE:
        assert spelt == []
    else:
        assert spelt == [["--config"]] and "--config" in out.output


def test_compare_names_its_eval_configuration_eval_config():
    compare = dict(COMMANDS)[("compare",)]
    options = {opt.name: opt.opts for opt in _options(compare)}
    assert options["eval_config"] == ["--eval-config"] and options["config"] == ["--config"]
