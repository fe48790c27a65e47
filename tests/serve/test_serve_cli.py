"""`python -m retrieval serve` as a host starts it, against the session's real Weaviate."""

from __future__ import annotations

import subprocess
import sys

from retrieval.config import REPO_ROOT, child_environment
from tests.conftest import free_port


def test_serve_ingest_beside_a_collection_of_another_case_fails_in_one_line(cli_env, weaviate_client):
    env = child_environment() | cli_env | {"LOOKUP_COLLECTION": "Testsample"}
    # over HTTP the server opens its services at once, and ends with what opening them raised
    out = subprocess.run(
        [sys.executable, "-m", "retrieval", "serve", "--ingest", "--transport", "http", "--port", str(free_port())],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "collection 'Testsample' differs from the existing collection 'TestSample'" in out.stderr, out.stderr[-3000:]
    assert "LOOKUP_COLLECTION" in out.stderr and "Traceback" not in out.stderr
    assert not weaviate_client.collections.exists("Testsample_Manifest")
