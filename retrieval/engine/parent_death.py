"""An embedded Weaviate gets SIGTERM when the process that launched it dies, however it dies (prctl PR_SET_PDEATHSIG).
The kernel ties the signal to the forking *thread*, so servers are launched from one thread that lives as long as the
process (`on_launcher`). Also: the processes of a binary serving a port, for finding an orphan of ours.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

PR_SET_PDEATHSIG = 1
SUPPORTED = sys.platform.startswith("linux")
_LIBC = ctypes.CDLL(None, use_errno=True) if SUPPORTED else None

T = TypeVar("T")


def die_with(parent_pid: int, sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A Popen preexec_fn: the child gets `sig` when its parent (thread) dies, and ends at once if the parent already
    died. Python's handler for `sig` is reset first: until exec it would swallow a parent-death signal."""

    def preexec() -> None:
        signal.signal(sig, signal.SIG_DFL)
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


_OUTPUT: list[Path] = []  # where the launch under way sends the server's stdout and stderr (launches are serial)


@contextlib.contextmanager
def output_to(log_path: Path) -> Iterator[None]:
    """Launches inside this block send the server's stdout and stderr to `log_path` (appended), not to this
    process's: its stdout may be a protocol's wire, and its stderr the operator's log."""
    _OUTPUT.append(log_path)
    try:
        yield
    finally:
        _OUTPUT.remove(log_path)


class ParentBoundPopen(subprocess.Popen):
    """subprocess.Popen whose child gets SIGTERM when the launching thread (and so the process) dies."""

    def __init__(self, args: Any, **kwargs: Any) -> None:
        if SUPPORTED and kwargs.get("preexec_fn") is None:
            kwargs["preexec_fn"] = die_with(os.getpid())
        if _OUTPUT and kwargs.get("stdout") is None and kwargs.get("stderr") is None:
            with open(_OUTPUT[-1], "ab") as log:
                kwargs.update(stdout=log, stderr=log)
                super().__init__(args, **kwargs)
            return
        super().__init__(args, **kwargs)


def bind_embedded_launches() -> None:
    """Make weaviate-client's embedded mode launch its server with ParentBoundPopen (it calls
    `subprocess.Popen` through its module's `subprocess` name, which is replaced by a copy of the module
    whose Popen is ours; the real subprocess module is left alone)."""
    import types

    import weaviate.embedded as embedded

    if getattr(embedded.subprocess, "Popen", None) is ParentBoundPopen:
        return
    shim = types.ModuleType("subprocess")
    shim.__dict__.update(subprocess.__dict__)
    shim.Popen = ParentBoundPopen  # type: ignore[attr-defined]
    embedded.subprocess = shim


class _Launcher:
    """One daemon thread, started on first use, that runs launches one at a time for the whole process."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, job: Callable[[], T]) -> T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="weaviate-launcher", daemon=True)
                self._thread.start()
        if threading.current_thread() is self._thread:
            return job()
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((job, done))
        return done.result()

    def _loop(self) -> None:
        while True:
            job, done = self._jobs.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(job())
            except BaseException as exc:  # handed to the caller, whatever it is
                done.set_exception(exc)


_LAUNCHER = _Launcher()


def on_launcher(job: Callable[[], T]) -> T:
    """Run `job` (which starts a server) on the process's launcher thread and return what it returns."""
    return _LAUNCHER.run(job)


# --- processes, through /proc ------------------------------------------------------------------------------
def serving_pids(binary_name: str, port: int, *, parent: int | None = None) -> list[int]:
    """Live processes running a binary named `binary_name` with `--port <port>` (children of `parent` only,
    when given)."""
    found: list[int] = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for proc in entries:
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[-1].split()
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if fields[0] in ("Z", "X") or (parent is not None and int(fields[1]) != parent):
            continue
        if not argv or os.path.basename(argv[0]) != binary_name.encode() or b"--port" not in argv:
            continue
        i = argv.index(b"--port")
        if i + 1 < len(argv) and argv[i + 1] == str(port).encode():
            found.append(int(proc.name))
    return found


def process_env(pid: int, name: str) -> str | None:
    """Variable `name` of the environment process `pid` started with (None when unreadable or unset)."""
    try:
        pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = name.encode() + b"="
    return next((p[len(prefix) :].decode(errors="replace") for p in pairs if p.startswith(prefix)), None)


def process_alive(pid: int | None) -> bool:
    """True while `pid` runs (a zombie child of this process is reaped and counts as ended)."""
    if not pid:
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
