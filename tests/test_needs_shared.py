"""Tests that read ../shared fail under CI=true when it is missing, and skip with a message elsewhere
(tests/conftest.py: shared_verdict, needs_shared); so do the browser tests when chromium is missing
(chromium_verdict, needs_chromium)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.config import REPO_ROOT

from .conftest import chromium_verdict, shared_verdict

ABSENT = Path("/nonexistent/shared/corpora/runbooks")


@pytest.mark.parametrize(
    "missing, ci, action",
    [
        ([], "true", None),
        ([], None, None),
        ([ABSENT], "true", "fail"),
        ([ABSENT], "TRUE", "fail"),
        ([ABSENT], "1", "fail"),
        ([ABSENT], "yes", "fail"),
        ([ABSENT], None, "skip"),
        ([ABSENT], "", "skip"),
        ([ABSENT], "false", "skip"),
        ([ABSENT], "0", "skip"),
    ],
)
def test_shared_verdict(missing, ci, action):
    verdict = shared_verdict(missing, ci=ci)
    assert (verdict and verdict[0]) == action
    if verdict:
        assert str(ABSENT) in verdict[1] and "../shared" in verdict[1]


def run_one_test(test_id: str, missing: str, missing_path: Path, **env: str) -> subprocess.CompletedProcess:
    """One real test, run by pytest in a subprocess with the variable `missing` pointed at a path that does not exist."""
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", missing)}
    clean.update({missing: str(missing_path)}, **env)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--no-header", test_id]
    return subprocess.run(command, cwd=REPO_ROOT, env=clean, capture_output=True, text=True, timeout=300)


def run_shared_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """A real test that reads ../shared, with the shared folder pointed at a path that does not exist."""
    test = "tests/core/test_corpus.py::test_runbooks_take_their_folder_as_domain"
    return run_one_test(test, "LOOKUP_TEST_SHARED_DIR", tmp_path / "no-shared", **env)


def test_a_missing_shared_folder_fails_the_run_under_ci(tmp_path):
    run = run_shared_test(tmp_path, CI="true")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed" in out and "CI=true" in out
    assert str(tmp_path / "no-shared" / "corpora" / "runbooks") in out  # names what is missing


def test_a_missing_shared_folder_skips_with_a_message_elsewhere(tmp_path):
    run = run_shared_test(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 skipped" in out and "needs ../shared" in out
    assert str(tmp_path / "no-shared" / "corpora" / "runbooks") in out


@pytest.mark.parametrize(
    "present, ci, action",
    [
        (True, "true", None),
        (True, None, None),
        (False, "true", "fail"),
        (False, "1", "fail"),
        (False, None, "skip"),
        (False, "false", "skip"),
    ],
)
def test_chromium_verdict(tmp_path, present, ci, action):
    chromium = tmp_path / "chromium"
    if present:
        chromium.write_text("")
    verdict = chromium_verdict(chromium, ci=ci)
    assert (verdict and verdict[0]) == action
    if verdict:
        assert str(chromium) in verdict[1] and "scripts/setup.sh --browser" in verdict[1]


def run_browser_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """A real browser test (no Weaviate needed), with chromium pointed at a path that does not exist."""
    test = "tests/evals/test_report.py::test_the_exported_report_has_distinct_series_colours_in_the_browser"
    return run_one_test(test, "LOOKUP_TEST_CHROMIUM", tmp_path / "no-chromium", **env)


def test_a_missing_chromium_fails_the_run_under_ci(tmp_path):
    run = run_browser_test(tmp_path, CI="true")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed" in out and "CI=true" in out
    assert str(tmp_path / "no-chromium") in out  # names what is missing


def test_a_missing_chromium_skips_with_a_message_elsewhere(tmp_path):
    run = run_browser_test(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 skipped" in out and "needs " + str(tmp_path / "no-chromium") in out
