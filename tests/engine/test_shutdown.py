"""Stopping the app or a CLI command stops the embedded Weaviate it started, and leaves alone one it reused
(retrieval/engine/shutdown.py). Real processes throughout: `python -m retrieval ingest`, `streamlit run app.py`
driven by chromium, real embedded servers on free ports with temporary data, real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from retrieval.config import REPO_ROOT, child_environment
from retrieval.engine.server import connect, port_open

from ..conftest import free_port
from ..helpers.browser import open_page, start_app
from ..helpers.processes import alive, stop_servers, wait_until, weaviate_pids

pytestmark = pytest.mark.slow

GONE_WITHIN_S = 12  # the limit: no Weaviate of its own left this long after the signal


def many_entries(root: Path, n: int = 200) -> Path:
    """A corpus whose ingest takes many seconds, so the signal comes while the command still works."""
    words = ["disk", "latency", "replica", "pod", "node", "quorum", "certificate", "backlog", "throttling", "eviction"]
    for i in range(n):
        folder = root / ("ops", "db", "net")[i % 3]
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"Step {j}: check the {words[(i + j) % 10]} of service {i} against {words[j % 10]}." for j in range(60))
        (folder / f"Alert{i:03d}.md").write_text(f"---\ntitle: Alert {i} {words[i % 10]}\n---\n{body}\n")
    return root


def embedded_env(data_dir: Path, port: int, grpc_port: int) -> dict[str, str]:
    return {"LOOKUP_DATA_DIR": str(data_dir), "LOOKUP_WEAVIATE_PORT": str(port), "LOOKUP_WEAVIATE_GRPC_PORT": str(grpc_port)}


def server_up(port: int, grpc_port: int) -> bool:
    return bool(weaviate_pids(port)) and port_open("127.0.0.1", port) and port_open("127.0.0.1", grpc_port)


def start_cli_ingest(tmp_path: Path, data_dir: Path, port: int, grpc_port: int) -> tuple[subprocess.Popen, Path]:
    env = child_environment()
    env.update(
        embedded_env(data_dir, port, grpc_port),
        LOOKUP_CONFIG=str(tmp_path / "no-lookup.yaml"),
        LOOKUP_CORPUS_DIR=str(many_entries(tmp_path / "kb")),
        LOOKUP_COLLECTION="StopTest",
    )
    log = tmp_path / "cli.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "ingest"], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return proc, log


@pytest.fixture
def ports():
    port, grpc_port = free_port(), free_port()
    yield port, grpc_port
    stop_servers(port)  # whatever a failed test left behind


# --- the CLI -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_cli_command_stops_the_server_it_started(tmp_path, ports, sig):
    port, grpc_port = ports
    proc, log = start_cli_ingest(tmp_path, tmp_path / "data", port, grpc_port)
    try:
        wait_until(lambda: server_up(port, grpc_port) or proc.poll() is not None, 120, "the CLI started its Weaviate")
        (server,) = weaviate_pids(port)
        sent = time.monotonic()
        proc.send_signal(sig)  # to the command's process only, as a service manager would
        rc = proc.wait(timeout=60)
        wait_until(
            lambda: not alive(server) and not port_open("127.0.0.1", port),
            max(0.1, GONE_WITHIN_S - (time.monotonic() - sent)),
            "the CLI's Weaviate was gone and its port free",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 128 + sig, f"the command ended with {rc}, not by the signal:\n{log.read_text(errors='replace')}"
    assert not port_open("127.0.0.1", grpc_port)
    assert weaviate_pids(port) == []


def test_a_signalled_cli_command_leaves_a_reused_server_running(tmp_path, ports, base_settings):
    port, grpc_port = ports
    settings = base_settings.with_(data_dir=tmp_path / "data", embedded_port=port, embedded_grpc_port=grpc_port)
    client = connect(settings)  # this test process starts the server; the CLI finds it running and reuses it
    try:
        (server,) = weaviate_pids(port)
        proc, log = start_cli_ingest(tmp_path, tmp_path / "data", port, grpc_port)
        try:
            # the reusing command is at work once it has created its collection
            wait_until(
                lambda: client.collections.exists("StopTest") or proc.poll() is not None,
                120,
                "the CLI connected and began its ingest",
            )
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert rc == 128 + signal.SIGTERM, log.read_text(errors="replace")
        assert alive(server) and weaviate_pids(port) == [server]
        assert client.is_ready()
    finally:
        client.close()
    wait_until(lambda: not alive(server), GONE_WITHIN_S, "the test's own server stopped with its client")


# --- the app -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_app_stops_the_server_it_started(tmp_path, ports, base_settings, page, sig):
    port, grpc_port = ports
    app = start_app(tmp_path, base_settings, collection="StopTest", weaviate_env=embedded_env(tmp_path / "data", port, grpc_port))
    try:
        open_page(page, app)
        expect(page.get_by_text("L1 connected")).to_be_visible()
        (server,) = weaviate_pids(port)
        sent = time.monotonic()
        app.proc.send_signal(sig)
        wait_until(
            lambda: not alive(server) and not port_open("127.0.0.1", port),
            GONE_WITHIN_S,
            "the app's Weaviate was gone and its port free",
        )
        rc = app.proc.wait(timeout=max(1.0, GONE_WITHIN_S - (time.monotonic() - sent)))
    finally:
        app.stop()
    assert rc == 0, app.log.read_text(errors="replace")
    assert weaviate_pids(port) == [] and not port_open("127.0.0.1", grpc_port)


def test_a_signalled_app_leaves_a_reused_server_running(tmp_path, ports, base_settings, page):
    port, grpc_port = ports
    settings = base_settings.with_(data_dir=tmp_path / "data", embedded_port=port, embedded_grpc_port=grpc_port)
    client = connect(settings)
    try:
        (server,) = weaviate_pids(port)
        app = start_app(
            tmp_path, base_settings, collection="StopTest", weaviate_env=embedded_env(tmp_path / "data", port, grpc_port)
        )
        try:
            open_page(page, app)
            expect(page.get_by_text("L1 connected")).to_be_visible()
            app.proc.send_signal(signal.SIGTERM)
            rc = app.proc.wait(timeout=30)
        finally:
            app.stop()
        assert rc == 0, app.log.read_text(errors="replace")
        assert alive(server) and weaviate_pids(port) == [server]
        assert client.is_ready()
    finally:
        client.close()
