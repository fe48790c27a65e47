"""`python -m retrieval bench`: L0, lookup, filtered L1, recording, ingest and the invocation store on synthetic
knowledge bases; or only its server, cluster or load part."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, json_option, settings_of


def register(app: typer.Typer) -> None:
    """Add `bench` to the CLI."""
    app.command()(bench)


def _load_bench(config: Path | None, plan: dict, out_dir: Path, as_json: bool) -> None:
    """`bench --load`: the load bench's table (or JSON) on stdout, its progress on stderr."""
    from retrieval.bench.load import LoadPlan, run_load_bench

    with reported():
        figures = run_load_bench(settings_of(config), LoadPlan(**plan), out_dir=out_dir, log=lambda m: typer.echo(m, err=True))
    typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])


def bench(
    sizes: str = typer.Option("1000,10000", help="comma-separated knowledge-base sizes"),
    as_json: bool = json_option("print the figures as JSON"),
    queries: int = typer.Option(200, help="lookups timed per size"),
    out_dir: Path = typer.Option(Path("bench/results"), "--out", help="where the dated result table is written"),
    invocation_rows: int = typer.Option(
        1_000_000, "--invocation-rows", help="synthetic tool_invocation rows for the dashboard queries (0 skips them)"
    ),
    server: bool = typer.Option(False, "--server", help="only the MCP server part: its added p50 over a direct call, calls/s"),
    cluster: int = typer.Option(0, "--cluster", help="only the cluster part: the first size on one node and on N nodes"),
    load: bool = typer.Option(False, "--load", help="only the load part: concurrent MCP SDK clients against serve"),
    clients: int = typer.Option(50, "--clients", help="--load: concurrent clients"),
    calls: int = typer.Option(40, "--calls", help="--load: timed lookup_knowledge calls per client"),
    load_transport: str = typer.Option("http", "--load-transport", help="--load: http (one server) or stdio (one per client)"),
    kill: bool = typer.Option(False, "--kill", help="--load: kill -9 the server mid-run, restart it, count lost calls"),
    soak_minutes: float = typer.Option(0.0, "--soak-minutes", help="--load: then a soak at half the rate, RSS each minute"),
    vectors: str = typer.Option(
        "real", "--vectors", help="real (every chunk embedded) or synthetic (template embeddings + noise; queries real)"
    ),
    config: Path | None = ConfigOpt,
) -> None:
    """Benchmark L0, lookup, filtered L1, recording, ingest and the invocation store on synthetic knowledge bases."""
    from retrieval.bench.runner import run_bench

    if cluster:
        from retrieval.bench.cluster import run_cluster_bench

        with reported(ValueError):
            first = int(sizes.split(",")[0])
            log = lambda m: typer.echo(m, err=True)  # noqa: E731
            figures = run_cluster_bench(
                settings_of(config), nodes=cluster, size=first, queries=queries, out_dir=out_dir, log=log, vectors=vectors
            )
        typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])
        return
    if load:
        _load_bench(
            config,
            dict(clients=clients, calls=calls, transport=load_transport, kill=kill, soak_minutes=soak_minutes),
            out_dir,
            as_json,
        )
        return
    if server:
        from retrieval.bench.server import run_server_bench

        with reported():
            figures = run_server_bench(settings_of(config), out_dir=out_dir, log=lambda m: typer.echo(m, err=True))
        typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])
        return
    with reported(ValueError):
        settings = settings_of(config)
        sizes_list = [int(x) for x in sizes.split(",") if x.strip()]
        if not sizes_list or min(sizes_list) < 1 or invocation_rows < 0 or queries < 1:
            raise ValueError(
                f"--sizes {sizes!r}, --queries {queries} and --invocation-rows {invocation_rows} must be positive (rows may be 0)"
            )
    with reported(ValueError):
        result = run_bench(
            settings,
            sizes=sizes_list,
            queries=queries,
            out_dir=out_dir,
            invocation_rows=invocation_rows,
            log=lambda m: typer.echo(m, err=True),
            vectors=vectors,
        )
    typer.echo(json.dumps(result, default=str) if as_json else result.get("table", json.dumps(result, indent=2, default=str)))
