"""Every port of a Weaviate the project starts listens on loopback, read from the kernel's
socket tables (/proc/net/tcp, tcp6) for the server's own sockets: the embedded server and a `cluster start` node.

Upstream v1.38.11 binds its public gRPC port and its cluster data port to every interface; our build patches them
to the host of GRPC_BIND_HOST and CLUSTER_DATA_BIND_HOST (retrieval/engine/build.py), which the launchers
set to 127.0.0.1. No port is excepted here: HTTP, gRPC, gossip, the data port and Raft must all be on loopback,
and the profiler (6060 on every interface by default) must be gone.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

from retrieval.engine.cluster import free_ports, start_cluster, stop_cluster
from retrieval.engine.server import connect, embedded_binary
from tests.conftest import free_port


def decode_address(hex_addr: str) -> str:
    """An address as /proc/net/tcp{,6} prints it: each 32-bit word in host (little-endian) order."""
    raw = bytes.fromhex(hex_addr)
    return str(ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))))


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
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and inode in inodes:
                hex_addr, hex_port = local.split(":")
                found.append((decode_address(hex_addr), int(hex_port, 16)))
    return found


def off_loopback(sockets: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The sockets reachable from another machine: any address but a loopback one (an IPv4-mapped loopback
    address counts as loopback)."""
    off = []
    for addr, port in sockets:
        ip = ipaddress.ip_address(addr)
        mapped = getattr(ip, "ipv4_mapped", None)
        if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
            off.append((addr, port))
    return off


def environment(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def assert_all_on_loopback(pid: int, expected_ports: set[int]) -> None:
    sockets = listening(pid)
    ports = {port for _, port in sockets}
    assert expected_ports <= ports, f"process {pid} does not listen on {sorted(expected_ports - ports)}: {sockets}"
    assert off_loopback(sockets) == [], f"process {pid} listens off loopback: {sockets}"


# --- the checker itself, so that it can fail ------------------------------------------------------------------
@pytest.mark.parametrize(
    "hex_addr, expected",
    [
        ("0100007F", "127.0.0.1"),
        ("00000000", "0.0.0.0"),
        ("0501A8C0", "192.168.1.5"),
        ("00000000000000000000000000000000", "::"),
        ("00000000000000000000000001000000", "::1"),
        ("0000000000000000FFFF00000100007F", "::ffff:127.0.0.1"),
    ],
)
def test_proc_addresses_are_decoded(hex_addr, expected):
    assert ipaddress.ip_address(decode_address(hex_addr)) == ipaddress.ip_address(expected)


def test_only_loopback_addresses_pass():
    sockets = [
        ("127.0.0.1", 1),
        ("127.0.0.2", 2),
        ("::1", 3),
        ("::ffff:127.0.0.1", 4),
        ("0.0.0.0", 5),
        ("::", 6),
        ("192.168.1.5", 7),
        ("::ffff:10.0.0.1", 8),
    ]
    assert off_loopback(sockets) == [("0.0.0.0", 5), ("::", 6), ("192.168.1.5", 7), ("::ffff:10.0.0.1", 8)]


def test_a_socket_on_every_interface_is_caught():
    """This process listens on 0.0.0.0 and on 127.0.0.1: the check reads both from the kernel and flags the first."""
    with socket.socket() as wide, socket.socket() as narrow:
        wide.bind(("0.0.0.0", 0))
        narrow.bind(("127.0.0.1", 0))
        wide.listen()
        narrow.listen()
        wide_port, narrow_port = wide.getsockname()[1], narrow.getsockname()[1]
        sockets = listening(os.getpid())
        assert ("0.0.0.0", wide_port) in sockets and ("127.0.0.1", narrow_port) in sockets
        with pytest.raises(AssertionError, match="listens off loopback"):
            assert_all_on_loopback(os.getpid(), {wide_port, narrow_port})


# --- the servers --------------------------------------------------------------------------------------------
def test_the_embedded_server_listens_only_on_loopback(base_settings, tmp_path):
    own = base_settings.with_(data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port())
    client = connect(own)
    try:
        process = client._connection.embedded_db.process
        assert Path(process.args[0]) == embedded_binary(own)
        env = environment(process.pid)
        wanted = {own.embedded_port, own.embedded_grpc_port, int(env["CLUSTER_DATA_BIND_PORT"]), int(env["RAFT_PORT"])}
        assert_all_on_loopback(process.pid, wanted)
        assert 6060 not in {port for _, port in listening(process.pid)}  # the profiler is off
    finally:
        client.close()


@pytest.mark.slow
def test_a_cluster_node_listens_only_on_loopback(base_settings, tmp_path):
    state = start_cluster(embedded_binary(base_settings), tmp_path / "cluster", 1, ports=free_ports, timeout_s=180)
    try:
        (node,) = state.nodes
        assert_all_on_loopback(node.pid, {node.http_port, node.grpc_port, node.gossip_port, node.data_port, node.raft_port})
        assert node.profiling_port not in {port for _, port in listening(node.pid)}
    finally:
        stop_cluster(state.data_dir, grace_s=10)
