"""Progress of a long CLI step (ingest, eval): `show(stage, done, total)` of `progress_display()` draws a bar when stderr is
a terminal; in a log, each stage prints whole lines (`embedding: 0/48 entries`) at its start, each tenth and its end.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

LOG_STEPS = 10  # lines per stage in a log, besides the first


def progress_line(stage: str, done: int, total: int, unit: str) -> str:
    return f"{stage}: {done}/{total} {unit}".rstrip()


class LineProgress:
    """One line per step, for a pipe or a log file: at the start, at each tenth passed, and at the end."""

    def __init__(self, stream: TextIO, *, steps: int = LOG_STEPS) -> None:
        self.stream, self.steps = stream, steps
        self._last: dict[str, tuple[int, int]] = {}  # stage -> (step printed last, total)

    def step_of(self, done: int, total: int) -> int:
        return self.steps if total <= 0 or done >= total else done * self.steps // total

    def __call__(self, stage: str, done: int, total: int, unit: str = "entries") -> None:
        step = self.step_of(done, total)
        last = self._last.get(stage)
        if last is not None and last == (step, total):
            return
        self._last[stage] = (step, total)
        self.stream.write(progress_line(stage, done, total, unit) + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass


class BarProgress:
    """A rich progress bar per stage, for a terminal."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            console=Console(file=stream, force_terminal=True),
        )
        self._tasks: dict[str, TaskID] = {}
        self._bar.start()

    def __call__(self, stage: str, done: int, total: int, unit: str = "entries") -> None:
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self._bar.add_task(stage, total=total, unit=unit)
        self._bar.update(task, completed=done, total=total, unit=unit)

    def close(self) -> None:
        self._bar.stop()


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


@contextmanager
def progress_display(stream: TextIO | None = None, *, terminal: bool | None = None) -> Iterator[LineProgress | BarProgress]:
    """A progress callback `show(stage, done, total, unit="entries")` for the block; a bar when `stream`
    (default stderr) is a terminal, lines otherwise. `terminal` overrides the check."""
    out = stream if stream is not None else sys.stderr
    use_bar = is_terminal(out) if terminal is None else terminal
    show: LineProgress | BarProgress = BarProgress(out) if use_bar else LineProgress(out)
    try:
        yield show
    finally:
        show.close()


def in_units(show: LineProgress | BarProgress, unit: str) -> Callable[[str, int, int], None]:
    """`show` as a (stage, done, total) callback that counts in `unit` ("probes", "queries")."""
    return lambda stage, done, total: show(stage, done, total, unit)
