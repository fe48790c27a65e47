"""A real Weaviate of another data directory (another process's) on the ports the settings name: connect refuses it,
the services, the CLI and a standing server use a server of their own on other ports, and say whose the port is."""

from __future__ import annotations

import json
import os
import time

import pytest

from retrieval.engine import server
from retrieval.engine.server import connect
from retrieval.errors import WeaviateSetupError
from retrieval.services import open_runtime

from ..conftest import SAMPLE_CORPUS
from ..helpers.cli import cli
from ..helpers.processes import stop_servers
from ..helpers.server_helper import foreign_weaviate


@pytest.fixture
def foreign(tmp_path):
    with foreign_weaviate(tmp_path / "someone-else") as server:
        yield server


def on_its_ports(base_settings, foreign, data_dir):
    return base_settings.with_(
        data_dir=data_dir, embedded_port=foreign.port, embedded_grpc_port=foreign.grpc_port, collection="TestMine"
    )


def whose(foreign) -> str:
    return f"127.0.0.1:{foreign.port} is held by another Weaviate (data directory {foreign.weaviate_dir}, pid {foreign.pid})"


def test_connect_refuses_a_server_of_another_data_directory(base_settings, foreign, tmp_path):
    settings = on_its_ports(base_settings, foreign, tmp_path / "mine")
    with pytest.raises(WeaviateSetupError) as info:
        connect(settings).close()
    assert whose(foreign) in str(info.value), str(info.value)
    assert foreign.collections() == {"Orphan"}


def test_the_services_start_their_own_server_elsewhere_and_say_whose_the_port_is(base_settings, foreign, tmp_path):
    settings, said = on_its_ports(base_settings, foreign, tmp_path / "mine"), []
    started = time.monotonic()
    runtime = open_runtime(settings, record=False, log=said.append)
    try:
        took = time.monotonic() - started
        moved = runtime.settings
        assert runtime.services.store is not None, runtime.services.l1_unavailable
        assert moved.embedded_port != foreign.port and moved.home_port == foreign.port
        assert moved.weaviate_data_dir == settings.weaviate_data_dir
        assert moved.weaviate_node == f"Embedded_at_{foreign.port}"  # the node its data was made under, kept
        assert said == [
            f"{whose(foreign)}; this app uses port {moved.embedded_port} (gRPC {moved.embedded_grpc_port}) "
            f"for its own Weaviate on {settings.weaviate_data_dir}"
        ]
        runtime.services.store.ensure_collection()
        # a second process of the same settings finds ours through the data directory's lock, not a third server
        assert server.place(settings).settings == moved
        assert foreign.collections() == {"Orphan"}, "nothing was written into the other process's server"
        foreign.stop()  # its port is free now, but ours still runs elsewhere: that one is used, not a second
        again = server.place(settings)
        assert again.settings == moved and f"this app uses port {moved.embedded_port}" in (again.note or ""), again
        print(f"\nforeign port: own server started on {moved.embedded_port} in {took:.1f} s")
    finally:
        runtime.close()


@pytest.mark.slow
def test_cli_ingest_and_lookup_never_write_into_a_foreign_server(foreign, tmp_path):
    env = {
        "LOOKUP_CORPUS_DIR": str(SAMPLE_CORPUS),
        "LOOKUP_DATA_DIR": str(tmp_path / "mine"),
        "LOOKUP_WEAVIATE_PORT": str(foreign.port),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(foreign.grpc_port),
        "LOOKUP_COLLECTION": "Mine",
        "LOOKUP_CONFIG": str(tmp_path / "none.yaml"),
        "LOOKUP_L1_TIMEOUT_S": "60",  # the start of a server with data, on a busy machine
    }
    ingest = cli("ingest", env=env)
    assert ingest.returncode == 0, ingest.stderr
    assert foreign.collections() == {"Orphan"}, "the ingest wrote into the other process's server"
    assert whose(foreign) in ingest.stderr and "this app uses port" in ingest.stderr
    lookup = cli("lookup", "Vault is sealed", "--json", env=env)
    assert lookup.returncode == 0, lookup.stderr
    assert whose(foreign) in lookup.stderr
    result = json.loads(lookup.stdout)
    assert (result["l1"]["status"], result["layer"]) == ("ok", "L0+L1"), result["l1"].get("error")
    assert foreign.collections() == {"Orphan"}


@pytest.mark.slow
def test_a_standing_server_moves_off_a_foreign_port_and_status_says_where(foreign, tmp_path):
    env = {
        "LOOKUP_CORPUS_DIR": str(SAMPLE_CORPUS),
        "LOOKUP_DATA_DIR": str(tmp_path / "mine"),
        "LOOKUP_WEAVIATE_PORT": str(foreign.port),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(foreign.grpc_port),
        "LOOKUP_CONFIG": str(tmp_path / "none.yaml"),
    }
    before = cli("server", "status", "--json", env=env)
    assert before.returncode == 1 and json.loads(before.stdout)["owner"] == "foreign", before.stdout
    started = cli("server", "start", "--json", env=env)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    try:
        assert (state["owner"], state["ready"]) == ("standing", True) and state["port"] != foreign.port
        status = json.loads(cli("server", "status", "--json", env=env).stdout)
        assert (status["owner"], status["port"]) == ("standing", state["port"])
    finally:
        assert cli("server", "stop", env=env).returncode == 0
        stop_servers(state["port"])
    assert foreign.collections() == {"Orphan"} and os.path.isdir(foreign.weaviate_dir)
