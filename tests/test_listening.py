"""Every port of a Weaviate the project starts listens on loopback (issue 23 item 2), read from the kernel's
socket tables (/proc/net/tcp, tcp6) for the server's own sockets: the embedded server and a `cluster start` node.

Weaviate v1.38.11 binds two ports to every interface with no setting to change it: the public gRPC port
(adapters/handlers/grpc/server.go: net.Listen("tcp", fmt.Sprintf(":%d", GRPC.Port))) and the cluster data
port (adapters/handlers/rest/clusterapi/grpc/server.go, ":%d" of CLUSTER_DATA_BIND_PORT). Those two are the
only ones allowed off loopback here, named by the server's own environment; the profiler (6060 on every
interface by default) must be gone, and HTTP, gossip and Raft must be on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from retrieval.store.cluster import free_ports, start_cluster, stop_cluster
from retrieval.store.weaviate_server import connect, embedded_binary
from tests.conftest import free_port


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket of `pid` in LISTEN state."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, size in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state != "0A" or inode not in inodes:
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            addr = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            found.append((str(ipaddress.ip_address(addr)), int(hex_port, 16)))
    return found


def environment(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def off_loopback(pid: int) -> set[int]:
    sockets = listening(pid)
    assert sockets, f"process {pid} listens on nothing"
    return {port for addr, port in sockets if not ipaddress.ip_address(addr).is_loopback}


def hard_coded(pid: int) -> set[int]:
    """The two ports v1.38.11 binds to every interface whatever it is told (see the module docstring)."""
    env = environment(pid)
    return {int(env["GRPC_PORT"]), int(env["CLUSTER_DATA_BIND_PORT"])}


def test_the_embedded_server_listens_on_loopback_but_for_its_two_hard_coded_ports(base_settings, tmp_path):
    own = base_settings.with_(data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port())
    client = connect(own)
    try:
        process = client._connection.embedded_db.process
        assert Path(process.args[0]).name == embedded_binary(own).name
        ports = {port for _, port in listening(process.pid)}
        assert own.embedded_port in ports and 6060 not in ports, ports  # the profiler is off
        assert own.embedded_grpc_port in hard_coded(process.pid)
        assert off_loopback(process.pid) <= hard_coded(process.pid), listening(process.pid)
    finally:
        client.close()


@pytest.mark.slow
def test_a_cluster_node_listens_on_loopback_but_for_its_two_hard_coded_ports(base_settings, tmp_path):
    state = start_cluster(embedded_binary(base_settings), tmp_path / "cluster", 1, ports=free_ports, timeout_s=180)
    try:
        (node,) = state.nodes
        ports = {port for _, port in listening(node.pid)}
        assert {node.http_port, node.gossip_port, node.raft_port} <= ports and node.profiling_port not in ports, ports
        assert off_loopback(node.pid) <= hard_coded(node.pid), listening(node.pid)
    finally:
        stop_cluster(state.data_dir, grace_s=10)
