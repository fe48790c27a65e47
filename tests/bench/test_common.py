"""What the benches share: waiting for the Weaviate server to go quiet, read from a real process's CPU time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from retrieval.bench.common import cpu_seconds, dir_mb, wait_for_quiet

SPIN = "import time\nt = time.time()\nwhile time.time() - t < 60: pass"


@pytest.fixture
def process():
    started: list[subprocess.Popen] = []

    def start(code: str) -> subprocess.Popen:
        started.append(subprocess.Popen([sys.executable, "-c", code]))
        return started[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_process_that_sleeps_is_quiet_in_one_window(process):
    proc = process("import time; time.sleep(60)")
    wait_for_quiet(proc.pid, window_s=0.5, max_s=0.5)  # past its start-up
    out = wait_for_quiet(proc.pid, window_s=0.5, max_s=5.0)
    assert out["quiet"] is True and out["cpu_share"] < 0.1 and out["waited_s"] < 1.5


def test_a_process_that_spins_is_waited_for_until_the_limit(process):
    proc = process(SPIN)
    out = wait_for_quiet(proc.pid, window_s=0.5, max_s=1.2)
    assert out["quiet"] is False and out["cpu_share"] >= 0.1 and out["waited_s"] >= 1.2
    assert cpu_seconds(proc.pid) > 0


def test_no_process_to_watch_is_no_wait():
    assert wait_for_quiet(None) == {"waited_s": 0.0, "cpu_share": None, "quiet": None}
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_seconds(gone.pid) is None and wait_for_quiet(gone.pid)["quiet"] is None


def test_dir_mb_counts_the_files_below_a_folder_and_nothing_for_a_missing_one(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one.bin").write_bytes(b"x" * 2**20)
    (tmp_path / "a" / "b" / "two.bin").write_bytes(b"x" * 2**19)
    assert dir_mb(tmp_path) == 1.5
    assert dir_mb(tmp_path / "absent") is None and dir_mb(None) is None
