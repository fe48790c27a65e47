"""No test server takes a port of the app's defaults (APP_PORTS): the session's settings and the helpers' environments
draw theirs, and the guard after each test (tests/conftest.py, no_default_ports) finds a run's process on a port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from retrieval.engine.cluster import APP_PORTS

from .conftest import RUN, SAMPLE_CORPUS, free_port
from .helpers.cli import standing_env
from .helpers.default_ports import RUN_ENV, default_ports_in, default_ports_in_env, held_by_run
from .helpers.processes import wait_until

DEFAULTS = ["embedded Weaviate port 8079", "embedded Weaviate gRPC port 50050"]


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({}, DEFAULTS),
        ({"LOOKUP_DATA_DIR": "/tmp/x"}, DEFAULTS),
        ({"LOOKUP_WEAVIATE_PORT": "23001"}, DEFAULTS[1:]),
        ({"LOOKUP_WEAVIATE_PORT": "23001", "LOOKUP_WEAVIATE_GRPC_PORT": "23002"}, []),
        ({"LOOKUP_WEAVIATE_URL": "http://127.0.0.1:23001"}, []),  # a server the test started, by URL
        ({"LOOKUP_L1_ENABLED": "false"}, []),  # no Weaviate at all
    ],
)
def test_an_environment_without_drawn_ports_names_the_defaults_it_would_take(env, found):
    assert default_ports_in_env(env) == found


def test_the_session_and_helper_servers_draw_their_ports(base_settings, tmp_path):
    assert default_ports_in(base_settings) == []
    assert default_ports_in(base_settings.with_(embedded_port=8079)) == ["embedded Weaviate port 8079"]
    assert default_ports_in_env(standing_env(tmp_path, SAMPLE_CORPUS, "Any")) == []
    assert free_port() not in APP_PORTS.values()


def listener(env: dict[str, str], port: int) -> subprocess.Popen:
    code = f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); print(1, flush=True)"
    code += "; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("mark", ["this run", "another run"])
def test_the_guard_tells_a_process_of_this_run_on_a_port(mark):
    port = free_port()
    env = {**os.environ, RUN_ENV: RUN if mark == "this run" else "someone-else"}
    proc = listener(env, port)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "1"
        held = held_by_run(RUN, {"app": port})
        if mark == "this run":
            assert held == [f"app port {port}: {os.path.basename(sys.executable)} (pid {proc.pid})"]
        else:
            assert held == []  # another run's (or a user's) server is not this run's doing
    finally:
        proc.kill()
        proc.wait()
    wait_until(lambda: not held_by_run(RUN, {"app": port}), 10, "the listener is gone")


def test_the_guard_tells_this_process_on_a_port():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert held_by_run(RUN, {"serve": port}) == [f"serve port {port}: {_me()} (pid {os.getpid()})"]


def _me() -> str:
    with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
        return os.path.basename(f.read().split(b"\0")[0].decode())
