"""Calls that must return within a time limit even when the library they go through would not.
They run on reused daemon threads (a thread per call is slow to start); a hung call keeps its thread and never delays a
later call, which starts another.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class TimedOut(Exception):
    """fn did not return within the time limit; it goes on, abandoned, on its daemon thread."""


class _Job:
    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()


class _Workers:
    """Daemon threads that run jobs; one more is started whenever none is idle."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.started = 0

    def submit(self, job: _Job) -> None:
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self.started += 1
            else:
                self._idle -= 1  # that idle thread takes this job (or an equal one) off the queue
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._run, name=f"call-within-{self.started}", daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.value = job.fn()
            except BaseException as exc:
                job.error = exc
            with self._lock:  # idle before the caller wakes, so its next call finds this thread
                self._idle += 1
            job.done.set()
            del job


_WORKERS = _Workers()


class Pending(Generic[T]):
    """A call started on a worker thread; `result` waits for it."""

    def __init__(self, job: _Job) -> None:
        self._job = job

    def result(self, timeout_s: float | None = None) -> T:
        """Its return value or exception; TimedOut when it has not returned within timeout_s (None: wait)."""
        if not self._job.done.wait(timeout_s):
            raise TimedOut(f"no answer within {timeout_s:g} s")
        if self._job.error is not None:
            raise self._job.error
        return self._job.value


def start(fn: Callable[[], T]) -> Pending[T]:
    """Run fn() on a worker thread and return at once: two queries in flight at the same time."""
    job = _Job(fn)
    _WORKERS.submit(job)
    return Pending(job)


def call_within(fn: Callable[[], T], timeout_s: float) -> T:
    """fn() on a worker thread; its result or exception, or TimedOut after timeout_s seconds."""
    return start(fn).result(timeout_s)
