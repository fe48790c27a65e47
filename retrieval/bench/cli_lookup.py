"""The bench's CLI figures: `python -m retrieval lookup` answered by a standing server's keeper, against what a CLI call
cannot avoid (Python start-up and the CLI's imports, plus one lookup in an open process), and started cold for scale.
Each figure is a median over runs on the sample corpus, each with a query not yet embedded in that process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retrieval.config import REPO_ROOT, Settings, child_environment
from retrieval.engine.ports import free_port

STARTUP_IMPORTS = "import retrieval.cli.commands, retrieval.serve.warm_client"  # what a `lookup` the keeper answers imports
QUERIES = (
    "Pod is crash looping.",
    "Vault is sealed",
    "disk is full on the database volume",
    "replication lag on the standby",
    "certificate expired for ingress",
    "the node is not ready",
    "DNS lookups time out",
)
GOAL_WARM_S = 1.5
GOAL_OVER_IN_PROCESS = 1.5


def _env(settings: Settings, data_dir: Path, port: int, grpc_port: int) -> dict[str, str]:
    return child_environment(
        LOOKUP_DATA_DIR=str(data_dir),
        LOOKUP_WEAVIATE_PORT=str(port),
        LOOKUP_WEAVIATE_GRPC_PORT=str(grpc_port),
        LOOKUP_WEAVIATE_BIN_DIR=str(settings.weaviate_bin_dir),
        LOOKUP_CORPUS_DIR=str(REPO_ROOT / "sample_corpus"),
        LOOKUP_EMBEDDING_MODEL=settings.embedding_model,
        LOOKUP_CONFIG=str(data_dir / "no-lookup.yaml"),  # the bench's settings only, not a ./lookup.yaml
    )


def _wall(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[1:4])} failed ({done.returncode}): {done.stderr[-1000:]}")
    return took


def timed_lookup(query: str, env: dict[str, str]) -> tuple[float, bool]:
    """The wall time of `python -m retrieval lookup -v QUERY` under `env`, and whether the standing keeper answered."""
    from retrieval.serve.warm_client import KEEPER_ANSWERED

    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "lookup", "-v", query],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"lookup {query!r} failed ({done.returncode}): {done.stderr[-1000:]}")
    return took, KEEPER_ANSWERED in done.stderr.splitlines()


def cli_lookup_figures(settings: Settings, workdir: Path, *, log: Callable[[str], None], runs: int = 5) -> dict[str, Any]:
    """warm_s (median wall of a CLI lookup with a standing server; keeper_answered: its keeper answered each), startup_s
    (a Python process importing what the lookup imports), in_process_ms (one lookup in an open process, p50),
    over_in_process (warm_s over their sum), cold_s (one CLI lookup that starts its own server), with the load beside them."""
    from retrieval.core.lookup import lookup_knowledge
    from retrieval.engine.standing import start_server, stop_server
    from retrieval.serve.warm_client import KEEPER
    from retrieval.services import open_runtime

    data_dir = workdir / "cli"
    data_dir.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    env = _env(settings, data_dir, port, grpc_port)
    here = settings.with_(
        data_dir=data_dir,
        embedded_port=port,
        embedded_grpc_port=grpc_port,
        corpus_dir=REPO_ROOT / "sample_corpus",
        weaviate_url=None,
        remote_grpc_port=None,
        collection=None,
    )
    cli = [sys.executable, "-m", "retrieval"]
    out: dict[str, Any] = {"runs": runs, "corpus": "sample_corpus"}
    log("cli: a standing server (server start), the sample corpus ingested, then CLI lookups against it")
    start_server(here, keeper_module=KEEPER)
    try:
        _wall([*cli, "ingest"], env)
        out["python_s"] = round(statistics.median(_wall([sys.executable, "-c", "pass"], env) for _ in range(3)), 3)
        out["startup_s"] = round(statistics.median(_wall([sys.executable, "-c", STARTUP_IMPORTS], env) for _ in range(3)), 3)
        timed = [timed_lookup(QUERIES[i % len(QUERIES)], env) for i in range(runs)]
        warm = [took for took, _ in timed]
        out["keeper_answered"] = all(keeper for _, keeper in timed)
        out["warm_s"] = round(statistics.median(warm), 3)
        out["warm_all_s"] = [round(w, 3) for w in warm]
        out["loadavg"] = round(os.getloadavg()[0], 2)
        runtime = open_runtime(here.with_(db_path=data_dir / "in-process.duckdb"), record="spool")
        try:
            lookup_knowledge("warm-up", runtime.services, here.options())
            times = []
            for q in QUERIES:
                t0 = time.perf_counter()
                lookup_knowledge(q + " (in process)", runtime.services, here.options())
                times.append((time.perf_counter() - t0) * 1000)
        finally:
            runtime.close()
        out["in_process_ms"] = round(statistics.median(times), 2)
        floor = out["startup_s"] + out["in_process_ms"] / 1000
        out["over_in_process"] = round(out["warm_s"] / floor, 3)
    finally:
        stop_server(here)
    log("cli: one CLI lookup that starts its own embedded server (cold)")
    out["cold_s"] = round(_wall([*cli, "lookup", QUERIES[0]], env), 2)
    out["cold_loadavg"] = round(os.getloadavg()[0], 2)
    return out
