"""tests/helpers/fault_server.py in a process of its own: a real embedded Weaviate that another process started (for
the data-directory-lock and orphan tests), or one of another data directory on the ports a test's settings name."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import weaviate

from retrieval.config import REPO_ROOT
from retrieval.engine.ports import free_port
from retrieval.engine.server import port_open

from .processes import stop_servers, wait_until

FAULT_SERVER = Path(__file__).resolve().parent / "fault_server.py"


class ServerHelper:
    """tests/helpers/fault_server.py in its own process."""

    def __init__(self, data_dir: Path, port: int, grpc_port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(FAULT_SERVER), str(data_dir), str(port), str(grpc_port)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def expect(self, prefix: str, timeout: float = 120) -> list[str]:
        line = ""
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline().strip()
        finally:
            timer.cancel()
        assert line.startswith(prefix), f"helper said {line!r}, expected {prefix}"
        return line.split()[1:]

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@dataclass(frozen=True)
class ForeignServer:
    """A Weaviate another process started on its own data directory: its ports, data directory and server pid."""

    port: int
    grpc_port: int
    weaviate_dir: Path
    pid: int
    helper: ServerHelper = field(repr=False, compare=False)

    def stop(self) -> None:
        """Its process exits, closing its client: the server stops and the ports are free."""
        self.helper.send("exit")
        self.helper.expect("CLOSED")
        wait_until(lambda: not port_open("127.0.0.1", self.port), 60, f"port {self.port} is free")

    def collections(self) -> set[str]:
        """The collections it holds, read with a plain client of this test (never through the project's connect)."""
        client = weaviate.connect_to_local(port=self.port, grpc_port=self.grpc_port)
        try:
            return set(client.collections.list_all(simple=True))
        finally:
            client.close()


@contextlib.contextmanager
def foreign_weaviate(data_dir: Path) -> Iterator[ForeignServer]:
    """A real embedded Weaviate of another process, on drawn ports and data under `data_dir` (collection Orphan)."""
    port, grpc_port = free_port(), free_port()
    helper = ServerHelper(data_dir, port, grpc_port)
    try:
        server_pid = int(helper.expect("SERVING")[0])
        yield ForeignServer(port, grpc_port, data_dir / f"weaviate-{port}", server_pid, helper)
    finally:
        helper.kill()
        stop_servers(port)
