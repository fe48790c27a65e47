"""Stopping the embedded Weaviate servers this process launched, at exit (atexit) or on SIGTERM/SIGINT; one it merely
reused is never touched. The app gets this via Streamlit's own signal handler; the CLI installs `exit_on_signals()`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.engine.parent_death import process_alive, serving_pids

STOP_TIMEOUT_S = 10.0  # a server that has not exited this long after SIGTERM gets SIGKILL


@dataclass
class _Own:
    """An embedded server this process launched (or is launching) on `port`."""

    owner_pid: int  # the process that launched it (a forked child does not own its parent's servers)
    port: int
    binary: Path
    server: Any = None  # the client's embedded-server object once it is up (it holds the Popen)


_LOCK = threading.Lock()
_OWN: dict[int, _Own] = {}
_HOOKED = False
_EXITING = threading.Event()
_LEFT: list[Any] = []  # servers signalled by stop_own_servers_soon and left to finish alone


def starting(port: int, binary: Path) -> None:
    """Called right before this process launches a server on `port`: from now on it is this process's to stop,
    even if a signal arrives before the launch returns."""
    global _HOOKED
    with _LOCK:
        _OWN[port] = _Own(os.getpid(), port, Path(binary))
        if not _HOOKED:
            atexit.register(stop_own_servers)
            _HOOKED = True


def started(port: int, server: Any) -> None:
    """The launch on `port` returned; `server` (with `.process`, a Popen, and `.stop()`) runs it."""
    with _LOCK:
        if port in _OWN:
            _OWN[port].server = server


def owned_ports() -> list[int]:
    with _LOCK:
        return sorted(own.port for own in _mine())


def stop_own_servers(timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """Stop every server this process launched that still runs: SIGTERM, then SIGKILL after `timeout_s`.
    Returns the pids that were running. Safe to call more than once."""
    with _LOCK:
        owned = _mine()
    stopped: list[int] = []
    for own in owned:
        stopped += stop_own_server(own.port, timeout_s)
    return stopped


def stop_own_server(port: int, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """Stop the server this process launched on `port` (nothing when it launched none there)."""
    with _LOCK:
        own = _OWN.pop(port, None)
    if own is None or own.owner_pid != os.getpid():
        return []
    popen, pids = _tell_to_stop(own)
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        if popen is not None and pid == popen.pid:
            try:
                popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        else:
            while process_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if process_alive(pid):
                _signal(pid, signal.SIGKILL)
    if own.server is not None:
        with contextlib.suppress(Exception):  # the process is gone already: this is the client's bookkeeping
            own.server.stop()  # (and the data-directory lock)
    return pids


def stop_own_servers_soon(wait_s: float) -> list[int]:
    """Tell every server this process launched to stop (SIGTERM) and wait for them at most `wait_s`: one still
    shutting down after that finishes alone (it has its signal), and the client's own stop no longer waits
    for it. For leaving within a host's deadline. Returns the pids signalled."""
    with _LOCK:
        owned = _mine()
        for own in owned:
            _OWN.pop(own.port, None)
    pids: list[int] = []
    for own in owned:
        pids += _tell_to_stop(own)[1]
    deadline = time.monotonic() + wait_s
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for own in owned:
        if own.server is not None:
            with contextlib.suppress(Exception):
                _LEFT.append(own.server.process)  # kept: a Popen dropped while its process runs warns
                own.server.process = None  # the client's stop() would wait for it: it is signalled already
                own.server.stop()  # the client's bookkeeping and the data-directory lock
    return pids


def _mine() -> list[_Own]:
    """The servers this process launched (a forked child owns none of its parent's). Call holding _LOCK."""
    return [own for own in _OWN.values() if own.owner_pid == os.getpid()]


def _tell_to_stop(own: _Own) -> tuple[subprocess.Popen | None, list[int]]:
    """SIGTERM one owned server's processes: the launched Popen while it runs, and children serving its port (a
    launch a signal interrupted). Returns the Popen (None: not handed over yet) and the pids signalled, sorted."""
    popen: subprocess.Popen | None = getattr(own.server, "process", None)
    pids = set(_children_serving(own.binary, own.port))
    if popen is not None and popen.poll() is None:
        pids.add(popen.pid)
    _terminate(pids)
    return popen, sorted(pids)


def exit_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Turn SIGTERM and SIGINT into SystemExit(128 + signal) in the main thread, so that `finally` blocks and the
    atexit hook run; a second signal while the process is stopping is ignored. Call once, from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("exit_on_signals() must be called from the main thread")

    def leave(signum, frame):
        if _EXITING.is_set():
            return
        _EXITING.set()
        raise SystemExit(128 + signum)

    for sig in signals:
        signal.signal(sig, leave)


# --- processes, through /proc (Linux; elsewhere only the launched Popen is known) ------------------------------
def _children_serving(binary: Path, port: int) -> list[int]:
    """Child processes of this process that run `binary --port <port>` (a launch that a signal interrupted
    before the client could hand its process over)."""
    return serving_pids(binary.name, port, parent=os.getpid())


def stop_pids(pids: list[int], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM (and SIGCONT) each process, then SIGKILL those still alive after `timeout_s`; waits until gone."""
    _terminate(pids)
    deadline = time.monotonic() + timeout_s
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if process_alive(pid):
            _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def _terminate(pids: Iterable[int]) -> None:
    for pid in pids:
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)  # a frozen (SIGSTOPped) server takes its SIGTERM only once it runs again


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone already
        os.kill(pid, sig)
