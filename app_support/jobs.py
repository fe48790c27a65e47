"""A long job with a progress bar: its progress in words, and what stops it shown as an error that says what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from retrieval.errors import LookupLabError

from .render import error

T = TypeVar("T")


class JobBar:
    """The bar of a running job: `counts(done, total)` ("12 of 48 runs") or `stages(stage, done, total)`."""

    def __init__(self, bar: Any, unit: str) -> None:
        self._bar, self._unit = bar, unit

    def counts(self, done: int, total: int) -> None:
        self._bar.progress(done / total if total else 1.0, text=f"{done} of {total} {self._unit}")

    def stages(self, stage: str, done: int, total: int, *_: Any) -> None:
        self._bar.progress(done / total if total else 1.0, text=f"{stage}: {done} of {total}")


def run_job(
    title: str, work: Callable[[JobBar], T], *, fix: str, when_down: str, unit: str = "runs", start: str = "working…"
) -> T | None:
    """`work(bar)` under a progress bar. A LookupLabError shows as `title` with `fix`; any other fault (a server gone)
    as `title` with `when_down`. Returns the work's result, or None when it stopped."""
    bar = st.progress(0.0, text=start)
    try:
        return work(JobBar(bar, unit))
    except LookupLabError as exc:
        error(title, exc, fix)
    except Exception as exc:  # a server that went away mid-job: say so, keep the page
        error(title, f"{type(exc).__name__}: {exc}", when_down)
    finally:
        bar.empty()
    return None
