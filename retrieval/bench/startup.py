"""`bench --server`'s start-up figures: what an agent host waits for when it starts `serve` over stdio (a cold start with
its own embedded Weaviate): spawn to the `initialize` reply, to a first lookup's answer, and stdin closed to exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from retrieval.config import REPO_ROOT, Settings, child_environment
from retrieval.engine.ports import free_port

HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench-startup", "version": "1"}}
GOAL_INITIALIZE_MS = 2000.0
GOAL_EXIT_S = 2.0


def _env(settings: Settings, workdir: Path) -> dict[str, str]:
    env = child_environment(settings, LOOKUP_DATA_DIR=str(workdir / "startup"), LOOKUP_DB_PATH=str(workdir / "startup.duckdb"))
    if not settings.weaviate_url:  # its own Weaviate, as a host's first start
        env.update({"LOOKUP_WEAVIATE_PORT": str(free_port()), "LOOKUP_WEAVIATE_GRPC_PORT": str(free_port())})
    return env


def measure_startup(settings: Settings, workdir: Path, *, query: str = "disk is full on the database volume") -> dict[str, Any]:
    """initialize_ms, first_lookup_s and exit_s of one cold stdio start (see the module docstring)."""
    with open(workdir / "startup.log", "w") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "serve", "--load-wait", "600"],
            cwd=REPO_ROOT,
            env=_env(settings, workdir),
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
    stdin, stdout = proc.stdin, proc.stdout
    if stdin is None or stdout is None:
        raise RuntimeError("serve was started without pipes")
    try:

        def send(message: dict[str, Any]) -> None:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()

        def receive(i: int) -> dict[str, Any]:
            while True:
                line = stdout.readline()
                if not line:
                    raise RuntimeError(f"serve exited with {proc.poll()}:\n{(workdir / 'startup.log').read_text()}")
                message = json.loads(line)
                if message.get("id") == i:
                    return message

        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO})
        receive(0)
        initialize_ms = (time.perf_counter() - t0) * 1000
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "lookup_knowledge", "arguments": {"query": query}}
        send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        answer = receive(1)
        first_lookup_s = time.perf_counter() - t0
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise RuntimeError(f"the first lookup was refused: {answer}")
        t1 = time.perf_counter()
        stdin.close()
        exit_code = proc.wait(timeout=60)
        exit_s = time.perf_counter() - t1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stdout.close()
    return {
        "initialize_ms": round(initialize_ms, 1),
        "first_lookup_s": round(first_lookup_s, 2),
        "exit_s": round(exit_s, 2),
        "exit_code": exit_code,
        "own_weaviate": not settings.weaviate_url,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def measure_sdk_startup(settings: Settings, workdir: Path) -> dict[str, Any]:
    """The same cold start through the official SDK's stdio Client: spawn to `initialize` done, then its close
    (stdin closed; the process group signalled after 2 s)."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    env = _env(settings, workdir) | {"LOOKUP_DATA_DIR": str(workdir / "startup-sdk")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrieval", "serve"], env=env, cwd=str(REPO_ROOT))
    figures: dict[str, Any] = {}

    async def run() -> None:
        t0 = time.perf_counter()
        async with Client(params, mode="legacy", client_info=Implementation(name="bench-startup-sdk", version="1")):
            figures["sdk_initialize_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            t1 = time.perf_counter()
        figures["sdk_close_s"] = round(time.perf_counter() - t1, 2)

    anyio.run(run)
    return figures


def startup_goals(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "stdio_initialize_ms": {
            "value": figures["initialize_ms"],
            "goal": f"<= {GOAL_INITIALIZE_MS:g}",
            "met": figures["initialize_ms"] <= GOAL_INITIALIZE_MS,
        },
        "stdio_exit_after_stdin_close_s": {
            "value": figures["exit_s"],
            "goal": f"<= {GOAL_EXIT_S:g}",
            "met": figures["exit_s"] <= GOAL_EXIT_S,
        },
    }


def render_startup(figures: dict[str, Any]) -> list[str]:
    weaviate = "its own embedded Weaviate started cold" if figures["own_weaviate"] else "the settings' Weaviate URL"
    return [
        "",
        f"Start-up over stdio ({weaviate}; load average {figures['loadavg']}):",
        "",
        "| figure | value |",
        "|---|---|",
        f"| initialize_ms (spawn to the initialize reply) | {figures['initialize_ms']} |",
        f"| first_lookup_s (spawn to a first lookup's answer, sent right after initialize) | {figures['first_lookup_s']} |",
        f"| exit_s (stdin closed, idle, to exit; code {figures['exit_code']}) | {figures['exit_s']} |",
    ] + (
        [
            f"| sdk_initialize_ms (the SDK's stdio Client: spawn to initialized) | {figures['sdk_initialize_ms']} |",
            f"| sdk_close_s (the SDK Client's close, just after initialize: loading) | {figures['sdk_close_s']} |",
        ]
        if "sdk_initialize_ms" in figures
        else []
    )
