"""`serve`: the MCP server's command, in its own module so that `python -m retrieval serve` answers `initialize` without
importing the rest of the CLI (Weaviate's client, pandas, evaluation). retrieval/cli/commands.py registers the same function.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, CorpusOpt
from retrieval.serve.loading import DEFAULT_WAIT_S


def serve(
    transport: str = typer.Option("stdio", help="stdio (the host starts this process) or http (streamable HTTP at /mcp)"),
    host: str = typer.Option("127.0.0.1", help="HTTP address; any other than loopback needs LOOKUP_SERVER_TOKEN"),
    port: int = typer.Option(8765, help="HTTP port"),
    ingest: bool = typer.Option(False, "--ingest", help="index the corpus first (unchanged entries are not embedded again)"),
    load_wait: float = typer.Option(
        DEFAULT_WAIT_S, "--load-wait", help="seconds a call that arrives while the model and Weaviate load waits for them"
    ),
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Serve lookup_knowledge and read_entry to agents over the Model Context Protocol; every call is recorded."""
    from retrieval.config import load_settings, server_token
    from retrieval.serve.serving import serve as run_server

    with reported():
        settings = load_settings(config_file=config, corpus_dir=corpus)
        run_server(
            settings, transport=transport, host=host, port=port, token=server_token(), ingest=ingest, load_wait_s=load_wait
        )
    # The spool is flushed and Weaviate told to stop: leave now. The interpreter's own teardown (a model still
    # loading on an abandoned thread, the ONNX runtime) took seconds, and a host kills a server 2 s after
    # closing its stdin.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> None:
    """`python -m retrieval serve ARGS`: the serve command alone."""
    from retrieval.engine.shutdown import exit_on_signals

    exit_on_signals()  # until serving installs its own handlers: a signal unwinds, stopping what was started
    app = typer.Typer(add_completion=False)
    app.command(name="serve")(serve)
    app(args=argv, prog_name="python -m retrieval serve")
