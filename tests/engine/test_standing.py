"""The standing server (`python -m retrieval server start|status|stop`): started for real by the CLI, used by CLI
lookups that connect instead of starting their own, stopped, and never left behind when its keeper is killed."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrieval.engine.server import connect, port_open
from retrieval.engine.standing import server_status, stop_server
from retrieval.errors import WeaviateSetupError

from ..conftest import SAMPLE_CORPUS, free_port
from ..helpers.cli import cli
from ..helpers.cli import standing_env as standing_server_env
from ..helpers.processes import alive, stop_servers, wait_until, weaviate_pids


@pytest.fixture
def standing_env(tmp_path):
    env = standing_server_env(tmp_path, SAMPLE_CORPUS, "Standing")
    yield env
    cli("server", "stop", env=env)
    stop_servers(int(env["LOOKUP_WEAVIATE_PORT"]))


@pytest.mark.slow
def test_a_standing_server_serves_every_cli_call_until_it_is_stopped(standing_env, base_settings):
    port = int(standing_env["LOOKUP_WEAVIATE_PORT"])
    assert cli("server", "status", env=standing_env).returncode == 1  # nothing serves the ports yet
    started = cli("server", "start", "--json", env=standing_env)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    assert (state["owner"], state["ready"], state["port"]) == ("standing", True, port)
    keeper = state["pid"]
    server = weaviate_pids(port)
    assert len(server) == 1 and alive(keeper)
    again = json.loads(cli("server", "start", "--json", env=standing_env).stdout)  # a second start leaves it as it is
    assert again["pid"] == keeper and weaviate_pids(port) == server

    ingest = cli("ingest", env=standing_env)
    assert ingest.returncode == 0, ingest.stderr
    # two lookups at once, each its own process: both connect to the standing server and both are recorded
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda q: cli("lookup", q, "--json", env=standing_env), ["Vault is sealed", "disk is full"]))
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["layer"] == "L0+L1"
    assert weaviate_pids(port) == server  # no call started a server of its own, and none stopped this one
    rows = cli("sql", "SELECT count(*) AS n FROM tool_invocation", "--json", env=standing_env)
    assert json.loads(rows.stdout)["n"] == 2

    status = json.loads(cli("server", "status", "--json", env=standing_env).stdout)
    assert (status["owner"], status["pid"], status["running"]) == ("standing", keeper, True)
    stopped = cli("server", "stop", env=standing_env)
    assert stopped.returncode == 0 and "stopped: a standing Weaviate" in stopped.stdout
    assert not alive(keeper) and not weaviate_pids(port) and not port_open("127.0.0.1", port)
    assert cli("server", "status", env=standing_env).returncode == 1


@pytest.mark.slow
def test_a_killed_keeper_takes_its_server_with_it_and_the_next_start_is_clean(standing_env):
    port = int(standing_env["LOOKUP_WEAVIATE_PORT"])
    first = json.loads(cli("server", "start", "--json", env=standing_env).stdout)
    server = weaviate_pids(port)
    os.kill(first["pid"], signal.SIGKILL)
    wait_until(lambda: not weaviate_pids(port) and not alive(first["pid"]), 60, "the server ends with its keeper")
    assert json.loads(cli("server", "status", "--json", env=standing_env).stdout)["owner"] == "none"
    second = json.loads(cli("server", "start", "--json", env=standing_env).stdout)
    assert second["pid"] != first["pid"] and second["ready"] and weaviate_pids(port) != server


@pytest.mark.slow
def test_a_server_another_process_started_is_reported_and_not_stopped(base_settings, tmp_path):
    settings = base_settings.with_(data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port())
    assert server_status(settings).owner == "none"
    client = connect(settings)  # as the app or serve would: this process owns it
    try:
        now = server_status(settings)
        assert (now.owner, now.pid, now.ready) == ("process", os.getpid(), True)
        with pytest.raises(WeaviateSetupError, match=f"started by process {os.getpid()}.*not stopped here"):
            stop_server(settings)
        assert port_open("127.0.0.1", settings.embedded_port)
    finally:
        client.close()
    deadline = time.monotonic() + 30
    while server_status(settings).owner != "none" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server_status(settings).owner == "none"
