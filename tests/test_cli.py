"""The CLI as a user runs it: separate processes, the real embedded Weaviate, a real DuckDB file."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import RUNBOOKS, free_port, needs_shared
from .helpers.cli import cli


@pytest.mark.slow
def test_runbooks_ingest_then_lookup_on_the_embedded_default(tmp_path):
    """Ingest then lookup with the defaults: the embedded Weaviate started by the CLI itself, on the runbooks corpus."""
    needs_shared()
    env = {
        "LOOKUP_CORPUS_DIR": str(RUNBOOKS),
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_WEAVIATE_PORT": str(free_port()),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(free_port()),
        "LOOKUP_COLLECTION": "Runbooks",
    }
    ingest = cli("ingest", env=env)
    assert ingest.returncode == 0, ingest.stderr
    report = json.loads(ingest.stdout)
    assert report["entries_total"] == 108 and report["added"] == 108
    assert "embedding: 108/108" in ingest.stderr  # progress is shown
    fit = report["support_fit"]  # the support baselines fitted on the knowledge base's own probes, after the ingest
    assert fit["kind"] == "self" and fit["fitted_now"] and fit["probes"] > 200 and fit["seconds"] > 0
    assert re.search(r"support calibration: (\d+)/\1 probes", ingest.stderr)  # its progress, counted in probes
    again = json.loads(cli("ingest", env=env).stdout)
    assert (again["unchanged"], again["chunks_embedded"]) == (108, 0)  # incremental: nothing re-embedded
    assert again["support_fit"]["id"] == fit["id"] and not again["support_fit"]["fitted_now"]  # nor probed again

    out = cli("lookup", "Pod is crash looping.", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # stdout holds exactly one JSON object (server logs go elsewhere)
    assert next(iter(data)) == "answer" and data["answer"] == "supported answer in the knowledge base"  # read first
    assert data["layer"] == "L0+L1"
    assert data["l1"]["filter"] == {"category": "kubernetes"}
    assert data["results"][0]["entry_id"] == "kubernetes/KubePodCrashLooping"
    for key in ("invocation_id", "query", "layer", "l0", "l1", "results", "relevance"):
        assert key in data
    assert set(data["l0"]) >= {"matched_titles", "matched_keywords", "domains", "entities", "matches"}
    assert set(data["l1"]) >= {"status", "filter", "candidates", "error"}
    assert set(data["results"][0]) >= {"entry_id", "title", "domain", "score", "source"}
    relevance = data["relevance"]
    assert set(relevance) == {
        *("semantic_support", "verdict", "level", "reason", "confidence", "estimate", "threshold", "features", "fit")
    }
    assert relevance["estimate"] in relevance["reason"]  # one wording of the estimate: the figure the text gives
    assert relevance["fit"]["baselines"] == {"kind": "self", "id": fit["id"], "probes": fit["probes"]}  # the fit it read
    assert data["embedding_model"] == "bge-small-en-v1.5"

    sql = (
        "SELECT layer, l1_status, json_extract_string(retrieval_details, '$.relevance.fit.baselines.id') AS fit "
        f"FROM tool_invocation WHERE id = '{data['invocation_id']}'"
    )
    rows = cli("sql", sql, "--json", env=env)
    assert rows.returncode == 0, rows.stderr
    assert json.loads(rows.stdout.splitlines()[0]) == {"layer": "L0+L1", "l1_status": "ok", "fit": fit["id"]}  # recorded

    unanswerable = cli("lookup", "how do I bake sourdough bread with rye flour", env=env)
    assert unanswerable.returncode == 0, unanswerable.stderr
    first = unanswerable.stdout.splitlines()[0]
    assert first.startswith("no supported answer in the knowledge base (the nearest entries are listed"), first


def test_dead_weaviate_url_still_answers_from_l0(cli_env):
    env = dict(cli_env, LOOKUP_WEAVIATE_URL=f"http://127.0.0.1:{free_port()}", LOOKUP_L1_TIMEOUT_S="2")
    out = cli("lookup", "Vault is sealed", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["l1"]["status"] in ("failed", "unavailable") and data["l1"]["error"]
    assert data["layer"] == "L0" and data["results"][0]["entry_id"] == "security/VaultSealed"
    rows = cli("sql", f"SELECT error FROM tool_invocation WHERE id = '{data['invocation_id']}'", "--json", env=env)
    assert json.loads(rows.stdout)["error"] == data["l1"]["error"]


def test_l1_disabled_gives_layer_l0(cli_env):
    data = json.loads(cli("lookup", "Vault is sealed", "--json", env=dict(cli_env, LOOKUP_L1_ENABLED="false")).stdout)
    assert (data["layer"], data["l1"]["status"]) == ("L0", "disabled")


def test_lookup_through_a_url_and_plain_output(cli_env):
    out = cli("lookup", "PostgreSQL replication lag on the standby", env=cli_env)
    assert out.returncode == 0, out.stderr
    assert "layer: L0+L1" in out.stdout and "databases/PostgresReplicationLag" in out.stdout
    first = out.stdout.splitlines()[0]
    assert first.startswith("supported answer in the knowledge base: databases/PostgresReplicationLag (support estimate ")


@pytest.mark.parametrize("query", ["", "   ", "\x01\x07\t"])
def test_empty_query_is_refused_with_a_message(cli_env, query):
    out = cli("lookup", query, env=cli_env)
    assert out.returncode == 2 and "query is empty" in out.stderr and out.stdout == ""


def test_broken_frontmatter_is_reported_by_name_and_the_rest_loads(cli_env, tmp_path):
    corpus = tmp_path / "kb"
    (corpus / "ops").mkdir(parents=True)
    (corpus / "ops" / "Good.md").write_text("---\ntitle: Vault is sealed\n---\nUnseal it.")
    (corpus / "ops" / "Broken.md").write_text("---\ntitle: [oops\n---\nbody")
    out = cli("lookup", "vault sealed", "--json", env=dict(cli_env, LOOKUP_CORPUS_DIR=str(corpus), LOOKUP_L1_ENABLED="false"))
    assert out.returncode == 0
    assert "Broken.md" in out.stderr and "not valid YAML" in out.stderr
    assert json.loads(out.stdout)["results"][0]["entry_id"] == "ops/Good"


def test_sql_prints_rows_in_full_and_refuses_writes(cli_env):
    long_query = "Vault is sealed " + "and the operators are paged " * 20
    cli("lookup", long_query, env=dict(cli_env, LOOKUP_L1_ENABLED="false"))
    out = cli("sql", "SELECT input FROM tool_invocation", env=cli_env)
    assert long_query.strip() in out.stdout  # never truncated
    refused = cli("sql", "DROP TABLE tool_invocation", env=cli_env)
    assert refused.returncode == 2 and "refused" in refused.stderr


@pytest.mark.slow
def test_an_eval_run_prints_no_library_warnings(cli_env, tmp_path):
    """ranx's own source raised DeprecationWarnings (invalid escape sequences) each time it was compiled, and they
    filled the eval's stderr. A fresh bytecode cache makes every module compile again, as on a fresh install."""
    env = dict(cli_env, LOOKUP_L1_ENABLED="false", PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    out = cli("eval", "eval_sets/sample-ops-alerts.yaml", "--configs", "l0_only", "--no-save", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["configs"]["l0_only"]
    assert "Warning" not in out.stderr, out.stderr[-2000:]


def test_ingest_beside_a_collection_of_another_case_fails_in_one_line(cli_env):
    out = cli("ingest", env={**cli_env, "LOOKUP_COLLECTION": "Testsample"})
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: collection 'Testsample' differs from the existing collection 'TestSample'")
    assert "LOOKUP_COLLECTION" in lines[-1] and "Traceback" not in out.stderr


def test_a_collection_name_weaviate_refuses_fails_in_one_line(cli_env):
    out = cli("ingest", env={**cli_env, "LOOKUP_COLLECTION": "kbload"})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "'kbload' must start with a capital letter" in out.stderr and "LOOKUP_COLLECTION" in out.stderr
