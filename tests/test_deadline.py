"""call_within: results, errors and time-outs on reused worker threads."""

from __future__ import annotations

import threading
import time

import pytest

from retrieval import deadline
from retrieval.deadline import TimedOut, call_within


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
    with pytest.raises(TimedOut, match="0.2 s"):
        call_within(release.wait, 0.2)
    assert 0.19 <= time.perf_counter() - t0 < 1.0
    t1 = time.perf_counter()
    assert call_within(lambda: "next", 1.0) == "next"  # another thread takes it while the first still hangs
    assert time.perf_counter() - t1 < 0.5
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
