"""The project's command line, run as a user runs it: `python -m retrieval ...` in a child process."""

from __future__ import annotations

import subprocess
import sys

from retrieval.config import REPO_ROOT, child_environment


def cli(*args, env=None, timeout=300, python_flags=()):
    """`python [python_flags] -m retrieval ARGS` with the LOOKUP_ settings of `env` alone (none of this process's)."""
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "retrieval", *args],
        cwd=REPO_ROOT,
        env=child_environment(**(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def standing_env(tmp_path, corpus, collection: str) -> dict[str, str]:
    """The settings of a standing server of its own for one test: `corpus`, data under `tmp_path`, free ports."""
    from ..conftest import free_port

    return {
        "LOOKUP_CORPUS_DIR": str(corpus),
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_WEAVIATE_PORT": str(free_port()),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(free_port()),
        "LOOKUP_COLLECTION": collection,
    }
