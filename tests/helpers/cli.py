"""The project's command line, run as a user runs it: `python -m retrieval ...` in a child process."""

from __future__ import annotations

import os
import subprocess
import sys

from retrieval.config import REPO_ROOT


def cli(*args, env=None, timeout=300):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=timeout
    )
