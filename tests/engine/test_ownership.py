"""Whose the embedded ports are: the pure decision (a table), and what the probe sees of the session's real server."""

from __future__ import annotations

import os

import pytest

from retrieval.engine.ownership import Holder, Owner, PortSeen, judge, look

from ..helpers.processes import weaviate_pids

OURS_DIR = "/data/lab/weaviate-8079"
ours = Holder(101, "weaviate-v1", OURS_DIR)
other_weaviate = Holder(202, "weaviate-v1", "/tmp/test-run/weaviate-8079")
unnamed_weaviate = Holder(303, "weaviate")  # a Weaviate whose environment does not say where its data is
web = Holder(404, "python3")


@pytest.mark.parametrize(
    ("http", "grpc", "owner", "why"),
    [
        (PortSeen(8079, False), PortSeen(50050, False), Owner.FREE, ""),
        (PortSeen(8079, True, (ours,)), PortSeen(50050, True, (ours,)), Owner.OURS, ""),
        (PortSeen(8079, True, (ours,)), PortSeen(50050, False), Owner.STARTING, ""),
        (
            PortSeen(8079, True, (other_weaviate,)),
            PortSeen(50050, True, (other_weaviate,)),
            Owner.FOREIGN,
            "127.0.0.1:8079 is held by another Weaviate (data directory /tmp/test-run/weaviate-8079, pid 202)",
        ),
        (
            PortSeen(8079, False),
            PortSeen(50050, True, (other_weaviate,)),
            Owner.FOREIGN,
            "127.0.0.1:50050 is held by another Weaviate (data directory /tmp/test-run/weaviate-8079, pid 202)",
        ),
        (
            PortSeen(8079, True, (ours,)),
            PortSeen(50050, True, (web,)),
            Owner.FOREIGN,
            "127.0.0.1:50050 is held by python3 (pid 404), not a Weaviate of this project",
        ),
        (
            PortSeen(8079, True, (unnamed_weaviate,)),
            PortSeen(50050, True, (unnamed_weaviate,)),
            Owner.FOREIGN,
            "127.0.0.1:8079 is held by another Weaviate (data directory unknown, pid 303)",
        ),
        (
            PortSeen(8079, True),  # listening, but no holder this user may inspect
            PortSeen(50050, True),
            Owner.FOREIGN,
            "127.0.0.1:8079 is held by a process this user cannot inspect",
        ),
    ],
)
def test_only_a_server_of_our_data_directory_is_ours(http, grpc, owner, why):
    verdict = judge(OURS_DIR, http, grpc)
    assert (verdict.owner, verdict.why) == (owner, why)


def test_the_probe_tells_the_sessions_server_by_its_data_directory(base_settings, weaviate_client, tmp_path):
    port, grpc_port = base_settings.embedded_port, base_settings.embedded_grpc_port
    assert look(base_settings.weaviate_data_dir, port, grpc_port).owner is Owner.OURS
    [server] = weaviate_pids(port)
    other = look(tmp_path / "weaviate-elsewhere", port, grpc_port)
    data = os.path.realpath(base_settings.weaviate_data_dir)
    assert other.owner is Owner.FOREIGN
    assert other.why == f"127.0.0.1:{port} is held by another Weaviate (data directory {data}, pid {server})"
