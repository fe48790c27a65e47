"""Reaching a real Weaviate: the embedded server (built from its Go module) or an existing one by URL."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import weaviate
from weaviate.classes.init import AdditionalConfig, Auth, GrpcConfig, Timeout

from retrieval.config import Settings
from retrieval.engine import parent_death, shutdown
from retrieval.engine.build import BIND_ENV, BIND_HOST, binary_path, client_file_name
from retrieval.engine.ownership import Owner, look
from retrieval.engine.ownership import port_open as port_open  # where the callers have always found it
from retrieval.engine.ports import free_port
from retrieval.errors import L1Error, WeaviateSetupError

EMBEDDED_ENV = {
    "ENABLE_MODULES": "",
    "DISABLE_TELEMETRY": "true",
    "LOG_LEVEL": "error",
    "AUTOSCHEMA_ENABLED": "false",
    **BIND_ENV,
}


LOCK_FILE = ".lookup-lab.lock"
log = logging.getLogger("retrieval.engine.server")


@dataclass
class Endpoint:
    """Where the gRPC queries of a client made by `connect` go, and their time-out (endpoint_for). `suspect` is
    set after a failed query, so that the next one first checks that the port still answers."""

    host: str
    grpc_port: int
    timeout_s: float
    suspect: bool = False


def endpoint_for(settings: Settings) -> Endpoint:
    """The endpoint of the server `connect(settings)` reaches: the URL's host and its gRPC port, or the embedded
    server's on 127.0.0.1; the settings' L1 time-out."""
    if settings.weaviate_url:
        return Endpoint(urlparse(settings.weaviate_url).hostname or "", _remote_grpc_port(settings), settings.l1_timeout_s)
    return Endpoint("127.0.0.1", settings.embedded_grpc_port, settings.l1_timeout_s)


def binary_name(version: str) -> str:
    """The file name weaviate-client's embedded mode looks for in its binary_path."""
    return client_file_name(version)


def embedded_binary(settings: Settings) -> Path:
    """The patched server binary scripts/setup.sh builds (retrieval/engine/build.py): in a directory of
    LOOKUP_WEAVIATE_BIN_DIR named for the patch, never an unpatched one."""
    return binary_path(settings.weaviate_bin_dir, settings.weaviate_version)


# gRPC channel behaviour. weaviate-client retries a search that fails with UNAVAILABLE (no connection) for
# about 63 s, whatever its time-out. With waitForReady a call waits for a connection instead, until its
# deadline (DEADLINE_EXCEEDED, not retried); a short reconnect back-off lets a channel find a server that
# came back within a second, instead of after up to two minutes of back-off grown while it was down.
GRPC_CHANNEL_OPTIONS = [
    ("grpc.service_config", json.dumps({"methodConfig": [{"name": [{}], "waitForReady": True}]})),
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def _config(settings: Settings) -> AdditionalConfig:
    t = settings.l1_timeout_s
    return AdditionalConfig(
        timeout=Timeout(init=max(t, 5.0), query=t, insert=max(t, 60.0)),
        grpc_config=GrpcConfig(channel_options=GRPC_CHANNEL_OPTIONS),
    )


def connect(settings: Settings) -> weaviate.WeaviateClient:
    """A connected client. Raises L1Error(unavailable=True) when no server can be reached, and WeaviateSetupError when an
    embedded server cannot be started. An embedded server this call starts is stopped at exit; one it reused is left."""
    try:
        return _connect_url(settings) if settings.weaviate_url else _connect_embedded(settings)
    except (L1Error, WeaviateSetupError):
        raise
    except Exception as exc:
        where = settings.weaviate_url or f"embedded Weaviate on 127.0.0.1:{settings.embedded_port}"
        raise L1Error(f"cannot reach {where}: {exc}", unavailable=True) from exc


def _connect_url(settings: Settings) -> weaviate.WeaviateClient:
    url = urlparse(settings.weaviate_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise L1Error(f"LOOKUP_WEAVIATE_URL: '{settings.weaviate_url}' is not an http(s) URL", unavailable=True)
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    auth = Auth.api_key(settings.weaviate_api_key) if settings.weaviate_api_key else None
    grpc_port = _remote_grpc_port(settings)
    client = weaviate.connect_to_custom(
        http_host=url.hostname,
        http_port=port,
        http_secure=secure,
        grpc_host=url.hostname,
        grpc_port=grpc_port,
        grpc_secure=secure,
        auth_credentials=auth,
        additional_config=_config(settings),
        skip_init_checks=False,
    )
    return client


def _remote_grpc_port(settings: Settings) -> int:
    return settings.remote_grpc_port or (443 if urlparse(settings.weaviate_url or "").scheme == "https" else 50051)


def _connect_embedded(settings: Settings) -> weaviate.WeaviateClient:
    host, port, grpc_port = BIND_HOST, settings.embedded_port, settings.embedded_grpc_port
    with _starting(port):  # threads of one process: one checks-and-starts at a time, the others then reuse it
        orphans = orphan_pids(settings)
        if orphans:  # a server of ours whose owner died: stopped and replaced, never reused unowned
            log.warning("stopping Weaviate %s on port %s: its owner died (an orphan)", orphans, port)
            shutdown.stop_pids(orphans)
        data_dir = settings.weaviate_data_dir
        verdict = look(data_dir, port, grpc_port)
        if verdict.owner is Owner.OURS:
            # A server from the app, another CLI call or a crashed run already serves this data directory's port.
            return weaviate.connect_to_local(host=host, port=port, grpc_port=grpc_port, additional_config=_config(settings))
        if verdict.owner is Owner.FOREIGN:
            raise WeaviateSetupError(
                f"{verdict.why}; it is not the server of {data_dir}, so it is neither used nor written to here: stop "
                "it, or choose other ports with LOOKUP_WEAVIATE_PORT and LOOKUP_WEAVIATE_GRPC_PORT"
            )
        if verdict.owner is Owner.STARTING:
            raise WeaviateSetupError(
                f"the Weaviate of {data_dir} answers on one of ports {port} and {grpc_port} only: it is still "
                "starting, try again in a moment"
            )
        binary = embedded_binary(settings)
        if not binary.is_file():
            raise WeaviateSetupError(
                f"the Weaviate server binary {binary} is missing: run scripts/setup.sh to build it, "
                "or set LOOKUP_WEAVIATE_URL to use an existing Weaviate"
            )
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = DataDirLock.acquire(data_dir, port, grpc_port)
        shutdown.starting(port, binary)  # ours to stop from here on, should a signal come during the start
        try:

            def launch() -> weaviate.WeaviateClient:
                with parent_death.output_to(data_dir / "server.log"):
                    return weaviate.connect_to_embedded(
                        version=settings.weaviate_version,
                        hostname=BIND_HOST,
                        binary_path=str(binary.parent),
                        persistence_data_path=str(data_dir),
                        port=port,
                        grpc_port=grpc_port,
                        environment_variables={**EMBEDDED_ENV, **node_env(settings)},
                        additional_config=_config(settings),
                    )

            parent_death.bind_embedded_launches()  # the server gets SIGTERM when this process dies, however it dies
            client = parent_death.on_launcher(launch)
        except BaseException:
            shutdown.stop_own_server(port)  # a start that failed or was interrupted leaves no server behind
            lock.release()
            raise
        _release_when_stopped(client, lock)
        shutdown.started(port, getattr(getattr(client, "_connection", None), "embedded_db", None))
        return client


_QUIET = threading.local()  # set in a thread while `answers` runs a check in it


class _ThreadQuietStdout:
    """sys.stdout as it was, except for a thread inside `answers`: its writes go to stderr. (Swapping sys.stdout
    itself would send another thread's output, say a `--json` answer, to stderr meanwhile.)"""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        return int((sys.stderr if getattr(_QUIET, "on", False) else self._inner).write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def answers(check: Callable[[], object]) -> bool:
    """`client.is_ready` or `client.is_live`, without the client's print of a failed check onto stdout, which may
    be a `--json` answer or MCP's wire: that thread's print goes to stderr."""
    if not isinstance(sys.stdout, _ThreadQuietStdout):
        sys.stdout = _ThreadQuietStdout(sys.stdout)
    _QUIET.on = True
    try:
        return bool(check())
    finally:
        _QUIET.on = False


@dataclass(frozen=True)
class Placement:
    """The settings this process's embedded server runs with, and, when the configured ports are another's, whose
    they are and where ours went (`note`, for people)."""

    settings: Settings
    note: str | None = None


def place(settings: Settings) -> Placement:
    """Where this process's embedded server is, or is to be started: the settings' ports unless something else holds
    them; then where the data directory's lock says ours runs, or a free pair. The data directory stays the same."""
    if settings.weaviate_url:
        return Placement(settings)
    data_dir, configured = settings.weaviate_data_dir, (settings.embedded_port, settings.embedded_grpc_port)
    verdict = look(data_dir, *configured)
    if verdict.owner in (Owner.OURS, Owner.STARTING):
        return Placement(settings)
    recorded = lock_ports(data_dir)  # ours may run elsewhere already: moved there by another process
    if recorded not in (None, configured) and look(data_dir, *recorded).owner in (Owner.OURS, Owner.STARTING):
        port, grpc_port = recorded
    elif verdict.owner is Owner.FREE:
        return Placement(settings)
    else:
        port, grpc_port = free_port(), free_port()
    home = settings.home_port or settings.embedded_port
    moved = settings.with_(home_port=home, embedded_port=port, embedded_grpc_port=grpc_port)
    why = verdict.why or f"127.0.0.1:{configured[0]} was another's when this data directory's Weaviate started"
    return Placement(moved, f"{why}; this app uses port {port} (gRPC {grpc_port}) for its own Weaviate on {data_dir}")


def node_env(settings: Settings) -> dict[str, str]:
    """For a server moved off its home port: the node name its data was made under (weaviate-client names the node
    after the port it serves on), and Raft ports picked as weaviate-client picks them (internal RPC: Raft + 1)."""
    if settings.weaviate_node == f"Embedded_at_{settings.embedded_port}":
        return {}
    raft, node = free_port(pair=True), settings.weaviate_node
    ports = {"RAFT_PORT": f"{raft}", "RAFT_INTERNAL_RPC_PORT": f"{raft + 1}"}
    return {"CLUSTER_HOSTNAME": node, **ports, "RAFT_JOIN": f"{node}:{raft}"}


def lock_ports(data_dir: Path) -> tuple[int, int] | None:
    """The ports the last process that started a server on `data_dir` wrote in its lock file, if it says."""
    try:
        fields = dict(f.split("=", 1) for f in (data_dir / LOCK_FILE).read_text().split()[1:] if "=" in f)
        return int(fields["port"]), int(fields["grpc"])
    except (OSError, KeyError, ValueError):
        return None


def orphan_pids(settings: Settings) -> list[int]:
    """Embedded servers of our binary on the settings' port and data directory whose owner is gone: nobody holds the data
    directory's lock, which a launcher holds for as long as it lives."""
    path = (settings.weaviate_data_dir / LOCK_FILE).resolve()
    with _HELD_LOCK:
        if path in _HELD or not path.is_file():
            return []
    data_dir = str(settings.weaviate_data_dir.resolve())
    pids = [  # on this data directory: a live process's server on another one that took the port is not ours
        pid
        for pid in parent_death.serving_pids(embedded_binary(settings).name, settings.embedded_port)
        if (found := parent_death.process_env(pid, "PERSISTENCE_DATA_PATH")) and os.path.realpath(found) == data_dir
    ]
    if not pids:
        return []
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return []  # its owner lives
    finally:
        os.close(fd)  # drops the probe's lock
    return pids


# --- one server per data directory ----------------------------------------------------------------------
_HELD_LOCK = threading.Lock()
_STARTING: dict[int, threading.Lock] = {}
_HELD: dict[Path, DataDirLock] = {}  # data directories whose lock this process holds


class DataDirLock:
    """An exclusive flock on <data_dir>/.lookup-lab.lock, held by the process that started the server there
    for as long as that server is its own (the kernel drops it when the process dies, however it dies).
    Acquired again by the same process (its server died and is started again), it is counted."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd, self.users = path, fd, 0

    @classmethod
    def acquire(cls, data_dir: Path, port: int, grpc_port: int | None = None) -> DataDirLock:
        path = (data_dir / LOCK_FILE).resolve()
        with _HELD_LOCK:
            lock = _HELD.get(path)
            if lock is None:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
                    os.close(fd)
                    pid = holder[0] if holder and holder[0].isdigit() else "unknown"
                    raise WeaviateSetupError(
                        f"the Weaviate data directory {data_dir} is locked by process {pid}, which started (or is "
                        f"starting) a Weaviate server on it, but nothing serves 127.0.0.1:{port}: a second server "
                        f"must not open the same data directory. Wait for it to come up, or stop process {pid}"
                    ) from None
                grpc = "" if grpc_port is None else f" grpc={grpc_port}"  # where ours runs: place() looks there
                owner = f"{os.getpid()} port={port}{grpc}\n".encode()
                os.pwrite(fd, owner, 0)
                os.ftruncate(fd, len(owner))
                lock = _HELD[path] = cls(path, fd)
            lock.users += 1
            return lock

    def release(self) -> None:
        with _HELD_LOCK:
            self.users -= 1
            if self.users <= 0 and _HELD.get(self.path) is self:
                del _HELD[self.path]
                os.close(self.fd)  # closing the only descriptor drops the flock


def _starting(port: int) -> threading.Lock:
    with _HELD_LOCK:
        return _STARTING.setdefault(port, threading.Lock())


def _release_when_stopped(client: weaviate.WeaviateClient, lock: DataDirLock) -> None:
    """Drop the lock when the client stops its server (client.close()). If this client version hides
    the embedded server, the lock stays until the process ends, which is safe, only stricter."""
    server = getattr(getattr(client, "_connection", None), "embedded_db", None)
    if server is None or not callable(getattr(server, "stop", None)):
        return
    stop, released = server.stop, threading.Event()

    def stop_and_release() -> None:
        try:
            stop()
        finally:
            if not released.is_set():
                released.set()
                lock.release()

    server.stop = stop_and_release
