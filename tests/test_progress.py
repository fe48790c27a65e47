"""CLI progress: plain lines in a log (a pipe), a bar in a terminal (a pseudo-terminal). The CLI runs as a user
runs it, against the test session's real Weaviate."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import time

import pytest

from retrieval.config import REPO_ROOT, child_environment
from retrieval.evals.sets import load_eval_set
from retrieval.progress import BarProgress, LineProgress, progress_display

from .conftest import SAMPLE_CORPUS

LINE = re.compile(r"^(?P<stage>[a-z ]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>[a-z ]+)$")


@pytest.mark.parametrize(
    "calls, expected",
    [
        ([("embedding", 0, 48), ("embedding", 48, 48)], ["embedding: 0/48 entries", "embedding: 48/48 entries"]),
        ([("embedding", 0, 0)], ["embedding: 0/0 entries"]),  # nothing to embed: said once
        (
            [("eval", d, 4) for d in range(1, 5)],
            [f"eval: {d}/4 entries" for d in range(1, 5)],
        ),
        # 100 steps: the start, each tenth passed, the end; nothing in between
        ([("eval", d, 100) for d in range(0, 101)], [f"eval: {d}/100 entries" for d in range(0, 101, 10)]),
        ([("eval", d, 25) for d in range(1, 26)], [f"eval: {d}/25 entries" for d in (1, 3, 5, 8, 10, 13, 15, 18, 20, 23, 25)]),
        ([("a", 0, 2), ("b", 0, 2), ("a", 2, 2), ("a", 2, 2)], ["a: 0/2 entries", "b: 0/2 entries", "a: 2/2 entries"]),
    ],
)
def test_log_lines(calls, expected):
    out = io.StringIO()
    show = LineProgress(out)
    for stage, done, total in calls:
        show(stage, done, total)
    assert out.getvalue().splitlines() == expected
    assert "\r" not in out.getvalue() and out.getvalue().endswith("\n")


def test_the_display_follows_the_stream():
    main, sub = pty.openpty()
    try:
        with open(sub, "w", closefd=False) as tty, progress_display(tty) as show:
            assert isinstance(show, BarProgress)
    finally:
        os.close(main)
        os.close(sub)
    with progress_display(io.StringIO()) as show:
        assert isinstance(show, LineProgress)
    with progress_display(io.StringIO(), terminal=True) as show:
        assert isinstance(show, BarProgress)


def small_corpus(tmp_path) -> tuple[str, int]:
    """One domain of the sample corpus (the machine is shared: embedding all 48 entries twice takes minutes)."""
    root = tmp_path / "kb"
    shutil.copytree(SAMPLE_CORPUS / "security", root / "security")
    return str(root), len(list((root / "security").glob("*.md")))


def cli_env(base_settings, tmp_path, collection: str, corpus: str = str(SAMPLE_CORPUS)) -> dict[str, str]:
    env = child_environment()
    env.update(
        {
            "LOOKUP_DATA_DIR": str(tmp_path / "data"),
            "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
            "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
            "LOOKUP_COLLECTION": collection,
            "LOOKUP_CORPUS_DIR": corpus,
        }
    )
    return env


@pytest.fixture
def fresh_collection(weaviate_client):
    """A collection name of this test's own, dropped before and after."""
    made = []

    def make(name: str) -> str:
        weaviate_client.collections.delete(name)
        made.append(name)
        return name

    yield make
    for name in made:
        weaviate_client.collections.delete(name)


@pytest.mark.slow
def test_ingest_and_eval_in_a_log(base_settings, tmp_path, fresh_collection, sample_store):
    """stderr is a pipe: whole lines, one per step, no carriage returns, no terminal escapes."""
    corpus, n = small_corpus(tmp_path)
    run = lambda *args, env: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "retrieval", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    ingest = run("ingest", env=cli_env(base_settings, tmp_path, fresh_collection("TestProgressLog"), corpus))
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)["added"] == n
    steps = [line for line in ingest.stderr.splitlines() if LINE.match(line)]
    assert steps[:2] == [f"embedding: 0/{n} entries", f"embedding: {n}/{n} entries"], ingest.stderr
    probes = [LINE.match(line).groupdict() for line in steps[2:]]  # then the support fit, on the corpus's own probes
    assert probes and all(p["stage"] == "support calibration" for p in probes), ingest.stderr
    assert probes[-1]["done"] == probes[-1]["total"] and ingest.stderr.rstrip().endswith("probes")
    assert "\r" not in ingest.stderr and "\x1b[" not in ingest.stderr

    # eval on the session's indexed sample corpus: its ingest step has nothing to embed
    out = run(
        "eval",
        "eval_sets/sample-ops-alerts.yaml",
        "--configs",
        "l0_only,lookup",
        "--json",
        env=cli_env(base_settings, tmp_path, "TestSample"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "\r" not in out.stderr and "\x1b[" not in out.stderr
    lines = [m.groupdict() for m in map(LINE.match, out.stderr.splitlines()) if m]
    lines = [d for d in lines if d["stage"] != "support calibration"]  # a fit made now, when the collection had none
    assert [(d["stage"], d["done"], d["total"]) for d in lines[:2]] == [("embedding", "0", "0"), ("eval", "1", lines[1]["total"])]
    evals = [(int(d["done"]), int(d["total"])) for d in lines if d["stage"] == "eval"]
    total = evals[-1][1]
    cases = len(load_eval_set(REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml").cases)
    assert total == 2 * cases and evals[-1] == (total, total)
    assert [d for d, _ in evals] == sorted({d for d, _ in evals}) and 2 <= len(evals) <= 12, evals
    assert {d["unit"] for d in lines if d["stage"] == "eval"} == {"case runs"}
    print(f"\neval in a log: {len(evals)} progress lines for {total} case runs: {[d for d, _ in evals]}")


def read_all(fd: int, proc: subprocess.Popen, timeout: float) -> bytes:
    """Everything the child writes to the pseudo-terminal, until it exits and the terminal is drained."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child side is closed
            break
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.slow
def test_ingest_in_a_terminal_shows_a_bar(base_settings, tmp_path, fresh_collection):
    corpus, n = small_corpus(tmp_path)
    env = cli_env(base_settings, tmp_path, fresh_collection("TestProgressBar"), corpus) | {"COLUMNS": "100", "TERM": "xterm"}
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrieval", "ingest"], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=sub, close_fds=True
    )
    os.close(sub)
    try:
        screen = read_all(main, proc, 600).decode("utf-8", "replace")
        stdout = proc.stdout.read().decode() if proc.stdout else ""
        assert proc.wait(timeout=60) == 0, screen[-3000:]
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    assert json.loads(stdout)["added"] == n
    assert "━" in screen and "\x1b[" in screen, screen[-2000:]  # rich's bar, drawn with terminal escapes
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert re.search(rf"embedding ━+ {n}/{n} entries", plain), plain[-2000:]  # redrawn in place, ending complete
    assert f"embedding: 0/{n} entries" not in screen  # not the log lines
