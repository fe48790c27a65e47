"""The standing server's keeper answering CLI lookups (retrieval.serve.warm_lookups), for real: `server start`, an
ingest, CLI lookups in their own processes. A lookup the keeper answered never imports weaviate-client or
onnxruntime in the CLI's process (`python -X importtime` lists what it imported); it gives the answer the CLI gives
when it opens everything itself; a changed corpus is read again; and once the keeper is gone the CLI looks up alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.serve.warm_client import PROTOCOL, settings_fingerprint, socket_path
from retrieval.serve.warm_lookups import WarmLookups

from ..conftest import SAMPLE_CORPUS
from ..helpers.cli import cli, standing_env
from ..helpers.processes import alive, stop_servers, wait_until, weaviate_pids

HEAVY = ("weaviate", "onnxruntime", "duckdb")  # what a CLI process that opens the services itself imports


def _lookup(query: str, env: dict[str, str]) -> tuple[dict, set[str]]:
    """A CLI lookup's JSON and the top-level packages its process imported."""
    done = cli("lookup", query, "--json", env=env, python_flags=("-X", "importtime"))
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {ln.split("|")[-1].strip().split(".")[0] for ln in done.stderr.splitlines() if ln.startswith("import time:")}
    return json.loads(done.stdout), imported


def _same_answer(a: dict, b: dict) -> bool:
    keep = lambda d: {k: v for k, v in d.items() if k not in ("invocation_id", "created_at", "timings_ms")}  # noqa: E731
    return keep(a) == keep(b)


@pytest.fixture
def warm_env(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    env = standing_env(tmp_path, corpus, "Warm")
    yield env
    cli("server", "stop", env=env)
    stop_servers(int(env["LOOKUP_WEAVIATE_PORT"]))


@pytest.mark.slow
def test_the_keeper_answers_cli_lookups_as_the_cli_would_and_reads_a_changed_corpus(warm_env):
    started = cli("server", "start", "--json", env=warm_env)
    assert started.returncode == 0, started.stderr
    assert cli("ingest", env=warm_env).returncode == 0

    keeper = Settings(data_dir=Path(warm_env["LOOKUP_DATA_DIR"]), embedded_port=int(warm_env["LOOKUP_WEAVIATE_PORT"]))
    assert socket_path(keeper).stat().st_mode & 0o777 == 0o600  # the user's own calls only
    warm, imported = _lookup("Vault is sealed", warm_env)
    assert not imported & set(HEAVY), imported & set(HEAVY)  # the keeper answered: the CLI opened nothing
    assert warm["layer"] == "L0+L1" and warm["results"][0]["entry_id"] == "security/VaultSealed"
    # other settings than the keeper's: the CLI opens the services itself, and its answer is the keeper's
    alone, imported = _lookup("Vault is sealed", warm_env | {"LOOKUP_L1_TIMEOUT_S": "11"})
    assert (
        "started with other settings: this call opens the services itself"
        in cli("lookup", "Vault is sealed", env=warm_env | {"LOOKUP_L1_TIMEOUT_S": "11"}).stderr
    )
    assert set(HEAVY) <= imported
    assert _same_answer(warm, alone)

    # every call is recorded (through the spool), each with its own id
    rows = cli("sql", "SELECT count(DISTINCT id) AS n FROM tool_invocation", "--json", env=warm_env)
    assert json.loads(rows.stdout)["n"] == 3

    # a new entry in the corpus: the keeper reads the corpus again, and L0 names the new entry
    new = os.path.join(warm_env["LOOKUP_CORPUS_DIR"], "security", "QuokkaTokenRevoked.md")
    with open(new, "w", encoding="utf-8") as f:
        f.write("---\ntitle: Quokka token revoked\nkeywords: [quokka token]\n---\nThe quokka token was revoked.\n")
    changed, imported = _lookup("quokka token revoked", warm_env)
    assert not imported & set(HEAVY)
    assert "security/QuokkaTokenRevoked" in [m["entry_id"] for m in changed["l0"]["matches"]]


@pytest.mark.slow
def test_after_the_keeper_is_killed_the_cli_looks_up_on_its_own(warm_env):
    started = json.loads(cli("server", "start", "--json", env=warm_env).stdout)
    port = int(warm_env["LOOKUP_WEAVIATE_PORT"])
    os.kill(started["pid"], signal.SIGKILL)
    wait_until(lambda: not weaviate_pids(port) and not alive(started["pid"]), 60, "the server ends with its keeper")
    result, imported = _lookup("disk is full", warm_env)  # the keeper's socket file is left behind, and refuses
    assert set(HEAVY) <= imported
    assert result["results"], result


def test_a_keeper_refuses_calls_made_with_other_settings_before_opening_anything(base_settings):
    warm = WarmLookups(base_settings)
    other = settings_fingerprint(base_settings.with_(top_k=base_settings.top_k + 1))
    assert warm.answer({"protocol": PROTOCOL, "settings": other, "query": "q"}) == {
        "refused": "the standing server was started with other settings"
    }
    assert "protocol" in warm.answer({"protocol": PROTOCOL + 1, "settings": warm.fingerprint, "query": "q"})["refused"]
    assert "protocol" in warm.answer(["not", "a", "request"])["refused"]
