"""Calls that must return within a time limit even when the library they go through would not."""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class TimedOut(Exception):
    """fn did not return within the time limit; it goes on, abandoned, on its daemon thread."""


def call_within(fn: Callable[[], T], timeout_s: float) -> T:
    """fn() on a daemon thread; its result or exception, or TimedOut after timeout_s seconds."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="call-within", daemon=True).start()
    if not done.wait(timeout_s):
        raise TimedOut(f"no answer within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
