"""`python -m retrieval server start|status|stop`: a standing embedded Weaviate (retrieval.engine.standing) whose keeper
answers CLI lookups warm (retrieval.serve.warm_lookups)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, JsonOpt

server_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="A standing embedded Weaviate that CLI calls, the Python API, the app and serve connect to instead of each "
    "starting one.",
)


def register(app: typer.Typer) -> None:
    """Add the `server` group to the CLI."""
    app.add_typer(server_app, name="server")


def _show(status, as_json: bool) -> None:
    typer.echo(json.dumps(status.to_dict()) if as_json else status.describe())


@server_app.command("start")
def start(
    timeout: float = typer.Option(180.0, "--timeout", help="seconds to wait for the server to be ready"),
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Start a standing server on the settings' data directory and ports (LOOKUP_DATA_DIR, LOOKUP_WEAVIATE_PORT, ...),
    detached; return once it is ready. One that already serves them is left as it is. Its keeper also answers CLI
    lookups made with the same settings, with the model and corpus it keeps open (retrieval.serve.warm_lookups)."""
    from retrieval.config import load_settings
    from retrieval.engine.standing import start_server
    from retrieval.serve.warm_client import KEEPER

    with reported():
        if config is not None:  # the keeper reads the same settings file, so that its lookups are the CLI's
            os.environ["LOOKUP_CONFIG"] = str(config.resolve())
        status = start_server(load_settings(config_file=config), wait_s=timeout, keeper_module=KEEPER)
    _show(status, as_json)


@server_app.command("status")
def status(as_json: bool = JsonOpt, config: Path | None = ConfigOpt) -> None:
    """What serves the settings' embedded ports: the standing server, another process of ours, or nothing (exit 1)."""
    from retrieval.config import load_settings
    from retrieval.engine.standing import server_status

    with reported():
        now = server_status(load_settings(config_file=config))
    _show(now, as_json)
    if not now.running:
        raise typer.Exit(1)


@server_app.command("stop")
def stop(
    timeout: float = typer.Option(30.0, "--timeout", help="seconds to wait for it to stop"),
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Stop the standing server (its data stays). A server the app or serve started is theirs to stop."""
    from retrieval.config import load_settings
    from retrieval.engine.standing import stop_server

    with reported():
        was = stop_server(load_settings(config_file=config), wait_s=timeout)
    if as_json:
        typer.echo(json.dumps({**was.to_dict(), "stopped": was.owner == "standing"}))
    else:
        typer.echo(f"stopped: {was.describe()}" if was.owner == "standing" else was.describe())
