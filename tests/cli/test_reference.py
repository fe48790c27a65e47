"""docs/cli.md is the command line's own help, current: generated again here from the commands and compared."""

from __future__ import annotations

import subprocess
import sys

from retrieval.config import REPO_ROOT


def test_the_cli_reference_is_what_the_commands_say_now(tmp_path):
    out = tmp_path / "cli.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "typer",
            "retrieval.cli.commands",
            "utils",
            "docs",
            "--name",
            "python -m retrieval",
            "--output",
            str(out),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    fresh = out.read_text(encoding="utf-8")
    assert "## `python -m retrieval explain`" in fresh and "`--config <path>`" in fresh and "--settings" not in fresh
    current = (REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == fresh, "docs/cli.md is out of date: run `bash scripts/cli-reference.sh`"
