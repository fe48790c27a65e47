"""`python -m retrieval cluster start|status|stop`: a local multi-node Weaviate cluster (retrieval.engine.cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, JsonOpt
from retrieval.config import load_settings

cluster_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="A local multi-node Weaviate cluster from the built server binary, for trying replication here.",
)

DataDirOpt = typer.Option(None, "--data-dir", help="the cluster's data directory (default: <LOOKUP_DATA_DIR>/cluster)")


def register(app: typer.Typer) -> None:
    """Add the `cluster` group to the CLI."""
    app.add_typer(cluster_app, name="cluster")


def _data_dir(data_dir: Path | None, config: Path | None) -> Path:
    return data_dir if data_dir is not None else load_settings(config_file=config).data_dir / "cluster"


@cluster_app.command("start")
def start(
    nodes: int = typer.Option(3, "--nodes", help="how many nodes (1-9)"),
    data_dir: Path | None = DataDirOpt,
    timeout: float = typer.Option(180.0, "--timeout", help="seconds to wait for every node to be ready and the cluster formed"),
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Start the nodes detached; return once all are ready and /v1/nodes lists them all healthy."""
    from retrieval.engine.cluster import start_cluster
    from retrieval.engine.server import embedded_binary

    with reported():
        directory = _data_dir(data_dir, config)
        state = start_cluster(embedded_binary(load_settings(config_file=config)), directory, nodes, timeout_s=timeout)
    if as_json:
        typer.echo(json.dumps(state.to_dict()))
        return
    for n in state.nodes:
        typer.echo(f"{n.name}: http {n.http_port}, grpc {n.grpc_port}, pid {n.pid}")
    first = state.nodes[0]
    typer.echo(f"cluster of {len(state.nodes)} nodes formed in {state.data_dir}; use it with")
    typer.echo(f"  export LOOKUP_WEAVIATE_URL={first.url} LOOKUP_WEAVIATE_REMOTE_GRPC_PORT={first.grpc_port}")


@cluster_app.command("status")
def status(data_dir: Path | None = DataDirOpt, as_json: bool = JsonOpt, config: Path | None = ConfigOpt) -> None:
    """Each node: pid, running, ready, and its status in /v1/nodes. Exits 1 when a node is not HEALTHY."""
    from retrieval.engine.cluster import cluster_status

    with reported():
        rows = cluster_status(_data_dir(data_dir, config))
    if as_json:
        typer.echo(json.dumps({"nodes": rows}))
    else:
        for r in rows:
            typer.echo(f"{r['name']}: http {r['http_port']}, grpc {r['grpc_port']}, pid {r['pid']}, {r['status']}")
    if any(r["status"] != "HEALTHY" for r in rows):
        raise typer.Exit(1)


@cluster_app.command("stop")
def stop(
    data_dir: Path = typer.Option(..., "--data-dir", help="the cluster's data directory"),
    grace: float = typer.Option(10.0, "--grace", help="seconds between SIGTERM and SIGKILL"),
) -> None:
    """Stop the nodes the state file names (SIGTERM, then SIGKILL after the grace); data stays."""
    from retrieval.engine.cluster import stop_cluster

    with reported():
        stopped = stop_cluster(data_dir, grace_s=grace)
    typer.echo(f"stopped {', '.join(stopped) if stopped else 'nothing (no node was running)'}")
