"""Processes of the tests' servers: the Weaviate processes on a port, whether one is alive, stopping them, and waiting
for a state."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest


# --- helpers -----------------------------------------------------------------------------------------
def weaviate_pids(port: int) -> list[int]:
    """Live Weaviate server processes started with `--port <port>`, found through /proc (zombies have no cmdline)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]).startswith(b"weaviate-") and b"--port" in argv:
            i = argv.index(b"--port")
            if i + 1 < len(argv) and argv[i + 1] == str(port).encode():
                pids.append(int(proc.name))
    return sorted(pids)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until(predicate, timeout: float, what: str | Callable[[], str]) -> None:
    """Call `predicate` until it is true; after `timeout` s, fail saying `what` was waited for (a callable `what`
    is called then, so that it can say what was last seen)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout} s waiting until {what() if callable(what) else what}")
        time.sleep(0.05)


def stop_servers(port: int) -> None:
    """End every Weaviate still serving `port` (orphans of killed processes included)."""
    for pid in weaviate_pids(port):
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError):  # gone already
                os.kill(pid, sig)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
