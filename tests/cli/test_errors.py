"""The command line's one error handler: a LookupLabError is one line `error: ...` on stderr and exit code 2."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli.errors import reported
from retrieval.errors import ConfigError

from ..helpers.cli import cli


@pytest.mark.parametrize("command", [["runs"], ["sql", "SELECT 1"], ["traffic"], ["server", "status"], ["compare", "a", "b"]])
def test_a_missing_settings_file_is_one_error_line_and_exit_2(tmp_path, command):
    missing = tmp_path / "no-such.yaml"
    out = cli(*command, "--config", str(missing))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"error: {missing}: config file not found"]


def test_the_handler_passes_only_the_errors_it_is_given():
    app = typer.Typer()

    @app.command()
    def fails(kind: str) -> None:
        with reported(ValueError):
            raise (
                ConfigError("bad setting") if kind == "config" else ValueError("bad value") if kind == "value" else KeyError(kind)
            )

    runner = CliRunner()
    assert (runner.invoke(app, ["config"]).exit_code, runner.invoke(app, ["config"]).stderr) == (2, "error: bad setting\n")
    assert runner.invoke(app, ["value"]).stderr == "error: bad value\n"
    assert isinstance(runner.invoke(app, ["other"]).exception, KeyError)  # not an expected failure: not turned into a line
