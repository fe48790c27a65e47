"""The cluster settings' validation and the local cluster's state file, ports, environment and stop rule,
without a Weaviate: the real cluster is in tests/engine/test_cluster.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from retrieval.config import load_settings
from retrieval.engine.cluster import (
    APP_PORTS,
    MAX_NODES,
    STATE_FILE,
    ClusterNode,
    ClusterState,
    cluster_status,
    fixed_ports,
    free_ports,
    is_our_node,
    node_env,
    plan_nodes,
    port_free,
    start_cluster,
    stop_cluster,
)
from retrieval.engine.parent_death import process_alive
from retrieval.errors import ConfigError, WeaviateSetupError


# --- settings ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, (None, None, None)),
        ({"LOOKUP_CONSISTENCY": "ONE"}, (None, None, "ONE")),
        ({"LOOKUP_CONSISTENCY": "quorum"}, (None, None, "QUORUM")),
        ({"LOOKUP_CONSISTENCY": " All "}, (None, None, "ALL")),
        ({"LOOKUP_CONSISTENCY": ""}, (None, None, None)),  # empty: unset, Weaviate's default
        ({"LOOKUP_REPLICATION_FACTOR": "3", "LOOKUP_SHARDS": "2"}, (3, 2, None)),
    ],
)
def test_cluster_settings(env, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env=env)
    assert (s.replication_factor, s.shards, s.consistency) == expected


@pytest.mark.parametrize(
    "env, needles",
    [
        ({"LOOKUP_CONSISTENCY": "SOME"}, ("LOOKUP_CONSISTENCY", "'SOME'", "ONE, QUORUM, ALL")),
        ({"LOOKUP_CONSISTENCY": "TWO"}, ("LOOKUP_CONSISTENCY", "'TWO'")),
        ({"LOOKUP_REPLICATION_FACTOR": "three"}, ("LOOKUP_REPLICATION_FACTOR", "three")),
        ({"LOOKUP_REPLICATION_FACTOR": "0"}, ("replication_factor", "0")),
        ({"LOOKUP_SHARDS": "-1"}, ("shards", "-1")),
    ],
)
def test_bad_cluster_settings_name_the_setting_and_value(env, needles, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    for needle in needles:
        assert needle in str(err.value)


def test_cluster_settings_from_yaml(tmp_path):
    cfg = tmp_path / "lookup.yaml"
    cfg.write_text("replication_factor: 3\nshards: 3\nconsistency: one\n")
    s = load_settings(config_file=cfg, env={})
    assert (s.replication_factor, s.shards, s.consistency) == (3, 3, "ONE")


# --- plan, ports, environment --------------------------------------------------------------------------
def test_fixed_ports_of_three_nodes_are_distinct_and_in_their_ranges():
    nodes = plan_nodes(3)
    assert [n.name for n in nodes] == ["node0", "node1", "node2"]
    ports = [p for n in nodes for p in n.ports()]
    assert len(ports) == len(set(ports))
    assert [n.http_port for n in nodes] == [8400, 8401, 8402]
    assert [n.grpc_port for n in nodes] == [50400, 50401, 50402]
    assert all(7400 <= n.gossip_port < n.data_port <= 7499 for n in nodes)
    assert [n.raft_port for n in nodes] == [8420, 8422, 8424]  # raft + 1 is each node's internal RPC port
    assert fixed_ports(1)["raft_port"] == 8422


def test_default_ports_of_the_largest_cluster_collide_neither_with_each_other_nor_with_the_apps():
    """No two ports of the largest cluster collide, nor any with an app's port (Raft's range once started at 8500,
    so node0's internal RPC port was the app's 8501)."""
    ports = [p for n in plan_nodes(MAX_NODES) for p in n.ports()]
    assert len(ports) == len(set(ports)), sorted(p for p in ports if ports.count(p) > 1)
    assert not set(ports) & set(APP_PORTS.values())
    assert {8501, 8765, 8079, 50050} <= set(APP_PORTS.values())  # the app's, serve's and the embedded server's defaults


@pytest.mark.parametrize("count", [0, -1, 10])
def test_node_count_out_of_range_is_refused(count):
    with pytest.raises(WeaviateSetupError, match=f"--nodes {count}"):
        plan_nodes(count)


def test_free_ports_are_distinct_and_pairs_are_free():
    nodes = plan_nodes(3, ports=free_ports)
    ports = [p for n in nodes for p in n.ports()]
    assert len(ports) == len(set(ports))
    assert all(port_free(p) for p in ports)


def test_node_env_forms_one_cluster(tmp_path):
    nodes = plan_nodes(3)
    envs = [node_env(n, nodes, tmp_path) for n in nodes]
    assert {e["RAFT_JOIN"] for e in envs} == {"node0:8420,node1:8422,node2:8424"}
    assert {e["RAFT_BOOTSTRAP_EXPECT"] for e in envs} == {"3"}
    assert all(e["CLUSTER_IN_LOCALHOST"] == "true" for e in envs)
    assert "CLUSTER_JOIN" not in envs[0]
    assert envs[1]["CLUSTER_JOIN"] == envs[2]["CLUSTER_JOIN"] == "localhost:7400"
    assert [e["PERSISTENCE_DATA_PATH"] for e in envs] == [str(tmp_path / f"node{i}") for i in range(3)]
    assert len({e["GO_PROFILING_PORT"] for e in envs}) == 3
    assert [e["RAFT_INTERNAL_RPC_PORT"] for e in envs] == ["8421", "8423", "8425"]
    assert {e["GO_PROFILING_DISABLE"] for e in envs} == {"true"}  # the profiler would listen on every interface
    # every other listener on loopback: gossip and Raft, and gRPC and the data port through our build's patch
    binds = ("CLUSTER_BIND_ADDR", "CLUSTER_ADVERTISE_ADDR", "GRPC_BIND_HOST", "CLUSTER_DATA_BIND_HOST")
    assert {e[k] for e in envs for k in binds} == {"127.0.0.1"}


# --- the state file ------------------------------------------------------------------------------------
def test_state_file_round_trip_and_json_shape(tmp_path):
    state = ClusterState(tmp_path, tmp_path / "weaviate-bin", plan_nodes(3)).with_pid("node1", 4242)
    state.save()
    again = ClusterState.load(tmp_path)
    assert again == state
    assert again.to_dict() == {
        "nodes": [
            {"name": "node0", "http_port": 8400, "grpc_port": 50400, "pid": None},
            {"name": "node1", "http_port": 8401, "grpc_port": 50401, "pid": 4242},
            {"name": "node2", "http_port": 8402, "grpc_port": 50402, "pid": None},
        ]
    }
    assert not (tmp_path / (STATE_FILE + ".tmp")).exists()


@pytest.mark.parametrize(
    "content, needle",
    [
        (None, "no cluster state file"),
        ("{not json", "not a cluster state file"),
        ('{"nodes": []}', "not a cluster state file"),  # no binary
        ('{"binary": "b", "nodes": [{"name": "node0"}]}', "not a cluster state file"),
        ('{"binary": "b", "nodes": []}', "'nodes' is empty"),
    ],
)
def test_bad_state_file_is_named(tmp_path, content, needle):
    if content is not None:
        (tmp_path / STATE_FILE).write_text(content)
    with pytest.raises(WeaviateSetupError) as err:
        ClusterState.load(tmp_path)
    assert needle in str(err.value) and str(tmp_path / STATE_FILE) in str(err.value)


# --- processes: stop signals only the state file's own servers -----------------------------------------
def _fake_server(tmp_path, port: int) -> subprocess.Popen:
    """A process whose command line looks like a Weaviate node's (`weaviate-… --port N`): a Python behind a
    symlink named weaviate-fake, sleeping."""
    link = tmp_path / "weaviate-fake"
    if not link.exists():
        link.symlink_to(sys.executable)
    return subprocess.Popen([str(link), "-c", "import time; time.sleep(120)", "--port", str(port)])


def _wait_ended(proc: subprocess.Popen, timeout: float = 30) -> int:
    return proc.wait(timeout=timeout)


def test_stop_signals_only_the_nodes_of_the_state_file(tmp_path):
    nodes = plan_nodes(2)
    ours = _fake_server(tmp_path, nodes[0].http_port)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # pid in the file, not a node
    try:
        deadline = time.monotonic() + 30
        while not is_our_node(ours.pid, nodes[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        state = ClusterState(tmp_path, tmp_path / "weaviate-fake", nodes).with_pid("node0", ours.pid).with_pid("node1", other.pid)
        state.save()
        assert is_our_node(ours.pid, nodes[0])
        assert not is_our_node(other.pid, nodes[1])
        assert not is_our_node(ours.pid, nodes[1])  # the right binary, but another node's port
        rows = cluster_status(tmp_path)
        assert [(r["name"], r["running"], r["ready"]) for r in rows] == [("node0", True, False), ("node1", False, False)]
        assert [r["status"] for r in rows] == ["UNKNOWN", "STOPPED"]
        assert stop_cluster(tmp_path, grace_s=5) == ["node0"]
        _wait_ended(ours)  # it sleeps 120 s unless signalled (stop reaped it already: no exit code to read)
        assert not process_alive(ours.pid)
        assert other.poll() is None, "a pid that is not the node's server was signalled"
        assert [n.pid for n in ClusterState.load(tmp_path).nodes] == [None, None]
    finally:
        for p in (ours, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_process_alive_reaps_a_dead_child():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while process_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(proc.pid)
    assert process_alive(os.getpid())
    assert not process_alive(None)


def test_start_refuses_a_missing_binary(tmp_path):
    with pytest.raises(WeaviateSetupError, match=r"binary .* is missing"):
        start_cluster(tmp_path / "no-such-binary", tmp_path / "c", 3)


def test_start_names_a_taken_port_and_leaves_nothing_running(tmp_path):
    binary = tmp_path / "weaviate-fake"
    binary.write_text("")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]

    def ports(i: int) -> dict[str, int]:
        p = free_ports(i)
        return {**p, "http_port": port} if i == 0 else p

    try:
        with pytest.raises(WeaviateSetupError, match=f"node0: port\\(s\\) {port} "):
            start_cluster(binary, tmp_path / "c", 2, ports=ports)
    finally:
        taken.close()
    saved = json.loads((tmp_path / "c" / STATE_FILE).read_text())
    assert [n["pid"] for n in saved["nodes"]] == [None, None]


def test_start_refuses_another_node_count_on_the_same_data_dir(tmp_path):
    binary = tmp_path / "weaviate-fake"
    binary.write_text("")
    ClusterState(tmp_path / "c", binary, plan_nodes(3, ports=free_ports)).save()
    with pytest.raises(WeaviateSetupError, match="holds a 3-node cluster, not 2"):
        start_cluster(binary, tmp_path / "c", 2)


def test_cli_status_without_a_cluster_names_the_file(tmp_path):
    from typer.testing import CliRunner

    from retrieval.cli import app

    res = CliRunner().invoke(app, ["cluster", "status", "--data-dir", str(tmp_path)])
    assert res.exit_code == 2
    assert str(tmp_path / STATE_FILE) in res.output


def test_cluster_node_json_has_the_documented_keys():
    node = ClusterNode("node0", 1, 2, 3, 5, 7, pid=9)
    assert node.to_dict() == {"name": "node0", "http_port": 1, "grpc_port": 2, "pid": 9}
    assert node.data_port == 4
