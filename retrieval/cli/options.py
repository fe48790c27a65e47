"""The options the commands share: the YAML settings file (`--config`), the corpus folder (`--corpus`) and `--json`;
and the old spellings of renamed options, which still work with a notice on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import typer

from retrieval.config import Settings, load_settings

CONFIG_HELP = "YAML settings file (default: LOOKUP_CONFIG or ./lookup.yaml)"
T = TypeVar("T")


def config_option() -> Any:
    """`--config FILE`: the YAML settings file, in every command that reads settings."""
    return typer.Option(None, "--config", help=CONFIG_HELP)


def corpus_option(help: str = "corpus folder (overrides LOOKUP_CORPUS_DIR)") -> Any:
    """`--corpus DIR`: the corpus folder."""
    return typer.Option(None, "--corpus", help=help)


def json_option(help: str = "print one JSON object") -> Any:
    """`--json`: machine-readable output on stdout."""
    return typer.Option(False, "--json", help=help)


def old_option(old: str, new: str) -> Any:
    """A hidden option under a name given up for `new`; pass its value to `renamed`."""
    return typer.Option(None, old, hidden=True, help=f"the old spelling of {new}")


def renamed(value: T | None, old_value: T | None, old: str, new: str) -> T | None:
    """The value of the option `new`, or else of its old spelling `old`, with a one-line notice when that was used."""
    if old_value is None:
        return value
    notice(old, new)
    return value if value is not None else old_value


def notice(old: str, new: str) -> None:
    """`note: OLD is now NEW` on stderr."""
    typer.echo(f"note: {old} is now {new}", err=True)


ConfigOpt = config_option()
CorpusOpt = corpus_option()
JsonOpt = json_option()
SettingsFileOpt = old_option("--settings", "--config")  # `runs` and `compare` named the settings file so


def settings_of(config: Path | None, **overrides: Any) -> Settings:
    """The settings: defaults < the YAML file < the environment < the command's own options."""
    return load_settings(config_file=config, **overrides)
