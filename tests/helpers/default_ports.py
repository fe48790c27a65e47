"""The app's default ports (APP_PORTS: app, serve, embedded Weaviate and its gRPC) belong to the people who run the app
on this machine: no test server may take one. Every process a test run starts inherits RUN_ENV, so a listener on a
default port is told apart as this run's (a test that forgot to draw its ports) or someone else's."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping

from retrieval.config import Settings
from retrieval.engine.cluster import APP_PORTS
from retrieval.engine.ownership import holders_of, listening_inodes
from retrieval.engine.parent_death import process_env

RUN_ENV = "PYTEST_LOOKUP_LAB_RUN"  # not LOOKUP_*: the helpers that start the CLI drop those, this one must stay


def mark_run() -> str:
    """This test run's mark, set in the environment every process it starts inherits (xdist workers: the controller's)."""
    return os.environ.setdefault(RUN_ENV, uuid.uuid4().hex)


def default_ports_in(settings: Settings) -> list[str]:
    """The settings' embedded ports that are one of the app's defaults (a URL's server is not started by a test)."""
    if settings.weaviate_url:
        return []
    taken = {port: name for name, port in APP_PORTS.items()}
    ports = (settings.embedded_port, settings.embedded_grpc_port)
    return [f"{taken[p]} port {p}" for p in ports if p in taken]


def default_ports_in_env(env: Mapping[str, str]) -> list[str]:
    """The same for the LOOKUP_* environment a test gives a child process; unset ports are the defaults."""
    if env.get("LOOKUP_WEAVIATE_URL") or env.get("LOOKUP_L1_ENABLED", "").lower() in ("0", "false", "no", "off"):
        return []
    defaults = Settings()
    port = int(env.get("LOOKUP_WEAVIATE_PORT", defaults.embedded_port))
    grpc_port = int(env.get("LOOKUP_WEAVIATE_GRPC_PORT", defaults.embedded_grpc_port))
    return default_ports_in(defaults.with_(embedded_port=port, embedded_grpc_port=grpc_port))


_NOT_OURS: set[int] = set()  # listening sockets found held by no process of the run: not looked up again after each test


def held_by_run(run: str, ports: Mapping[str, int] = APP_PORTS) -> list[str]:
    """`ports` that a process of test run `run` listens on (this process, or one that inherited the mark)."""
    held = []
    for name, port in ports.items():
        inodes = listening_inodes(port) - _NOT_OURS  # a user's app on 8501 is looked up once, not after every test
        ours = [h for h in (holders_of(inodes) if inodes else ()) if h.pid == os.getpid() or process_env(h.pid, RUN_ENV) == run]
        held += [f"{name} port {port}: {h.program} (pid {h.pid})" for h in ours]
        if not ours:
            _NOT_OURS.update(inodes)
    return held
