"""A standing embedded Weaviate (`python -m retrieval server start/status/stop`) that CLI calls, `open_lookup()`, the
app and `serve` connect to instead of each starting their own. It is owned by a detached keeper process, which records
`standing-server.json` beside the data; a kill -9 of the keeper stops the server too (parent-death signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from retrieval.config import Settings, load_settings
from retrieval.engine.ownership import Owner, look
from retrieval.engine.parent_death import process_alive
from retrieval.engine.server import LOCK_FILE, answers, connect, lock_ports, place, port_open
from retrieval.errors import WeaviateSetupError

STATE_FILE = "standing-server.json"
LOG_FILE = "standing-server.log"
KEEPER_MODULE = __name__  # the plain keeper: it holds the server and nothing else
START_WAIT_S = 180.0  # a cold start on a busy machine: loading a big data directory takes a while
STOP_WAIT_S = 30.0


@dataclass(frozen=True)
class ServerStatus:
    """What serves the settings' data directory. `owner`: "standing" (started by `server start`), "process" (the app,
    `serve` or a CLI call started it and holds the data directory: `pid`), "unknown" (its server answers, but no process
    of ours holds the data directory), "foreign" (another data directory's server holds the ports: `why`), or "none"."""

    owner: str
    port: int
    grpc_port: int
    data_dir: str
    pid: int | None = None
    ready: bool = False
    started_at: str | None = None
    version: str | None = None
    why: str | None = None

    @property
    def running(self) -> bool:
        return self.owner not in ("none", "foreign")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "running": self.running}

    def describe(self) -> str:
        where = f"127.0.0.1:{self.port} (gRPC {self.grpc_port}), data {self.data_dir}"
        if self.owner == "standing":
            since = f" since {self.started_at}" if self.started_at else ""
            return f"a standing Weaviate {self.version or ''} serves {where}: keeper process {self.pid}{since}, {_ready(self)}"
        if self.owner == "process":
            return f"Weaviate serves {where}, started by process {self.pid} (the app, serve or a CLI call), {_ready(self)}"
        if self.owner == "unknown":
            return f"something answers on {where}, but no process of ours holds that data directory, {_ready(self)}"
        if self.owner == "foreign":
            return f"no Weaviate of data {self.data_dir} runs: {self.why}"
        return f"no Weaviate serves {where}"


def _ready(s: ServerStatus) -> str:
    return "ready" if s.ready else "not ready yet (loading)"


def state_path(settings: Settings) -> Path:
    return settings.weaviate_data_dir / STATE_FILE


def read_state(settings: Settings) -> dict[str, Any] | None:
    """The keeper's state file, or None when there is none (or it cannot be read: a keeper writing it, or gone)."""
    try:
        return json.loads(state_path(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _lock_holder(settings: Settings) -> int | None:
    """The pid written in the data directory's lock file by the process that started the server there."""
    try:
        first = (settings.weaviate_data_dir / LOCK_FILE).read_text(encoding="utf-8").split()
    except OSError:
        return None
    return int(first[0]) if first and first[0].isdigit() else None


def _is_ready(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/.well-known/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def server_status(settings: Settings) -> ServerStatus:
    """What serves the settings' embedded ports now (a server given by URL is not ours to report)."""
    port, grpc_port, data_dir = settings.embedded_port, settings.embedded_grpc_port, str(settings.weaviate_data_dir)
    state = read_state(settings) or {}
    keeper = state.get("pid")
    if isinstance(keeper, int) and process_alive(keeper):
        port, grpc_port = state.get("port", port), state.get("grpc_port", grpc_port)  # moved when the ports were another's
        return ServerStatus(
            "standing", port, grpc_port, data_dir, keeper, _is_ready(port), state.get("started_at"), state.get("version")
        )
    verdict = look(settings.weaviate_data_dir, port, grpc_port)
    if verdict.owner is Owner.FOREIGN:
        recorded = lock_ports(settings.weaviate_data_dir)
        if recorded is None or look(settings.weaviate_data_dir, *recorded).owner in (Owner.FREE, Owner.FOREIGN):
            return ServerStatus("foreign", port, grpc_port, data_dir, why=verdict.why)
        port, grpc_port = recorded  # ours runs on the ports its lock file names
    elif verdict.owner is Owner.FREE:
        return ServerStatus("none", port, grpc_port, data_dir)
    holder = _lock_holder(settings)
    if holder is not None and process_alive(holder):
        return ServerStatus("process", port, grpc_port, data_dir, holder, _is_ready(port))
    return ServerStatus("unknown", port, grpc_port, data_dir, None, _is_ready(port))


def start_server(settings: Settings, *, wait_s: float = START_WAIT_S, keeper_module: str = KEEPER_MODULE) -> ServerStatus:
    """Leave a standing server on the settings' data directory and ports and return its status once ready (one of ours
    already serving them is left as it is). `keeper_module`: what `python -m` runs as the keeper. Raises
    WeaviateSetupError when the keeper cannot start it (the reason from its log) or it is not ready in `wait_s`."""
    if settings.weaviate_url:
        raise WeaviateSetupError(
            f"LOOKUP_WEAVIATE_URL is set ({settings.weaviate_url}): the commands use that server, there is none to start"
        )
    now = server_status(settings)
    if now.running:
        return now
    settings.weaviate_data_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.weaviate_data_dir / LOG_FILE
    env = {
        **os.environ,
        "LOOKUP_DATA_DIR": str(settings.data_dir),
        "LOOKUP_WEAVIATE_PORT": str(settings.embedded_port),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(settings.embedded_grpc_port),
        "LOOKUP_WEAVIATE_BIN_DIR": str(settings.weaviate_bin_dir),
    }
    with open(log_path, "ab") as log:
        keeper = subprocess.Popen(
            [sys.executable, "-m", keeper_module],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,  # its own session: the terminal's Ctrl-C or hang-up does not reach it
            close_fds=True,
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        code = keeper.poll()
        if code is not None:
            raise WeaviateSetupError(f"the standing server did not start (exit code {code}): {_log_tail(log_path)}")
        state = read_state(settings)
        if state and state.get("pid") == keeper.pid and state.get("ready"):
            keeper.returncode = 0  # handed off: it outlives this process, which never waits for it
            return server_status(settings)
        time.sleep(0.2)
    with contextlib.suppress(OSError):
        os.kill(keeper.pid, signal.SIGTERM)
    raise WeaviateSetupError(f"the standing server was not ready within {wait_s:g} s: {_log_tail(log_path)}")


def stop_server(settings: Settings, *, wait_s: float = STOP_WAIT_S) -> ServerStatus:
    """Stop the standing server of the settings' data directory (SIGTERM to its keeper, which stops Weaviate), and
    return what it was. A server another process owns is not stopped: WeaviateSetupError says which process."""
    now = server_status(settings)
    if not now.running:  # nothing of ours runs (another data directory's server on the ports is not ours to stop)
        return now
    if now.owner != "standing" or now.pid is None:
        raise WeaviateSetupError(f"{now.describe()}; it was not started by `server start`, so it is not stopped here")
    os.kill(now.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not process_alive(now.pid) and not port_open("127.0.0.1", now.port):
            state_path(settings).unlink(missing_ok=True)  # a keeper killed -9 leaves its file behind
            return now
        time.sleep(0.1)
    raise WeaviateSetupError(f"keeper process {now.pid} did not stop within {wait_s:g} s")


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return f"(no log at {path})"
    return " | ".join(text[-lines:]) or f"(empty log at {path})"


def keep(settings: Settings, *, while_up: Callable[[], None] | None = None) -> None:
    """The keeper: start the embedded server, say so in the state file, and hold it until SIGTERM or SIGINT, running
    `while_up` (which returns only when the process is signalled) once the server is ready, if given."""
    from retrieval.engine import shutdown

    shutdown.exit_on_signals()
    placed = place(settings)  # another data directory's server on the ports: ours runs on others, said in the state
    if placed.note:
        print(placed.note, flush=True)
    settings = placed.settings
    client = connect(settings)
    path = state_path(settings)
    state = {
        "pid": os.getpid(),
        "port": settings.embedded_port,
        "grpc_port": settings.embedded_grpc_port,
        "data_dir": str(settings.weaviate_data_dir),
        "version": settings.weaviate_version,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "ready": False,
    }
    try:
        path.write_text(json.dumps(state), encoding="utf-8")
        while not answers(client.is_ready):
            time.sleep(0.2)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**state, "ready": True}), encoding="utf-8")
        tmp.replace(path)
        print(f"standing Weaviate ready on 127.0.0.1:{settings.embedded_port}", flush=True)
        if while_up is not None:
            while_up()
        while True:
            time.sleep(3600)
    finally:
        with contextlib.suppress(OSError):
            if (read_state(settings) or {}).get("pid") == os.getpid():
                path.unlink()
        client.close()  # stops the server this process started


if __name__ == "__main__":
    keep(load_settings())
