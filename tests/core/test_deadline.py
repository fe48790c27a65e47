"""call_within: results, errors and time-outs on reused worker threads."""

from __future__ import annotations

import threading
import time

import pytest

from retrieval.core import deadline
from retrieval.core.deadline import TimedOut, call_within


def test_returns_the_value_and_raises_the_error():
    assert call_within(lambda: 41 + 1, 1.0) == 42
    with pytest.raises(KeyError, match="nope"):
        call_within(lambda: {}["nope"], 1.0)


def test_sequential_calls_reuse_their_thread():
    call_within(lambda: None, 1.0)
    before = deadline._WORKERS.started
    workers = {t.name for t in threading.enumerate() if t.name.startswith("call-within-")}
    names = {call_within(lambda: threading.current_thread().name, 1.0) for _ in range(200)}
    assert deadline._WORKERS.started == before
    # Idle workers left by earlier tests (e.g. calls that hung on a frozen server) may take turns.
    assert names and names <= workers


def test_a_hung_call_times_out_and_does_not_hold_up_the_next():
    release = threading.Event()
    t0 = time.perf_counter()
    with pytest.raises(TimedOut, match=r"0\.2 s"):
        call_within(release.wait, 0.2)
    assert 0.19 <= time.perf_counter() - t0 < 3.0  # not the hung call's whole wait (it never returns)
    # another thread takes it while the first still hangs (else this would raise TimedOut after 1 s)
    assert call_within(lambda: "next", 1.0) == "next"
    release.set()


def test_concurrent_callers_each_get_their_own_answer():
    out: dict[int, int] = {}

    def caller(i: int) -> None:
        out[i] = call_within(lambda: (time.sleep(0.01), i * i)[1], 2.0)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: i * i for i in range(16)}


def test_a_started_call_runs_beside_the_caller():
    """start() returns at once: the caller's own work and the started call overlap (each waits on the other)."""
    started_ran = threading.Event()
    caller_ran = threading.Event()

    def other() -> str:
        started_ran.set()
        assert caller_ran.wait(10), "the caller never ran while this call was in flight"
        return "lexical"

    pending = deadline.start(other)
    assert started_ran.wait(10), "start() did not run the call on another thread"
    caller_ran.set()
    assert pending.result(10) == "lexical"


def test_a_started_call_gives_its_error_and_its_time_out():
    with pytest.raises(KeyError, match="gone"):
        deadline.start(lambda: {}["gone"]).result(5)
    release = threading.Event()
    pending = deadline.start(lambda: release.wait(10))
    with pytest.raises(TimedOut):
        pending.result(0.05)
    release.set()
    assert pending.result(10) is True
