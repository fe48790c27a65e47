"""`python -m retrieval serve` driven by another real client than the Python SDK's: the MCP Inspector's CLI (the
TypeScript SDK, which checks a result's structured content against the tool's output schema itself), over stdio as a
host launches it from a configuration file and over streamable HTTP: tools/list, calls at both detail levels, refused
arguments. npx fetches the pinned Inspector into NPM_CACHE on first use (npm reaches its registry); without npx the
tests skip, and under CI=true they fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from retrieval.config import REPO_ROOT, child_environment
from retrieval.serve.answer_brief import BRIEF_CHARS
from retrieval.serve.mcp_tools import LOOKUP_OUTPUT
from tests.conftest import act_on, ci_enabled, free_port
from tests.helpers.mcp_process import ServedProcess, serve_env, stored_rows

INSPECTOR = "@modelcontextprotocol/inspector@0.21.1"  # pinned: a CI machine fetches this very version
NPM_CACHE = Path(os.environ.get("LOOKUP_TEST_NPM_CACHE") or Path.home() / ".cache" / "lookup-lab" / "npm")
QUERY = "Pod is crash looping and restarting"


def npx_verdict(npx: str | None, *, ci: str | None) -> tuple[str, str] | None:
    """What an Inspector test does without npx, as chromium_verdict does without chromium: None (run), ("fail", why)
    under CI, ("skip", why) on a developer's machine."""
    if npx:
        return None
    install = "Node.js with npm (Debian's nodejs and npm packages, or nodesource) provides npx"
    if ci_enabled(ci):
        return "fail", f"CI=true but npx is not on PATH ({install}): CI must run the MCP Inspector tests, not skip them"
    return "skip", f"needs npx to run the MCP Inspector, which is missing here ({install}); under CI=true this fails"


@pytest.mark.parametrize(
    "npx, ci, action",
    [("/usr/bin/npx", None, None), ("/usr/bin/npx", "true", None), (None, None, "skip"), (None, "true", "fail")],
)
def test_without_npx_the_inspector_tests_skip_but_fail_under_ci(npx, ci, action):
    verdict = npx_verdict(npx, ci=ci)
    assert (verdict and verdict[0]) == action
    if verdict:
        assert "npx" in verdict[1] and "CI=true" in verdict[1]


def inspector(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> dict:
    """`npx -y INSPECTOR --cli ARGS` from the repository; its stdout parsed (it prints the JSON-RPC result)."""
    npx = shutil.which("npx")
    act_on(npx_verdict(npx, ci=os.environ.get("CI")))
    assert npx is not None
    run_env = {**(env or child_environment()), "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"}
    out = subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", *args],
        cwd=REPO_ROOT,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, f"the Inspector CLI exited {out.returncode}:\n{out.stderr[-3000:]}"
    return json.loads(out.stdout)


def check_brief_answer(result: dict) -> dict:
    assert not result.get("isError"), result
    out = result["structuredContent"]
    jsonschema.validate(out, LOOKUP_OUTPUT)
    (text,) = result["content"]
    assert json.loads(text["text"]) == out and len(text["text"]) <= BRIEF_CHARS
    assert next(iter(out)) == "answer" and out["detail"] == "brief" and "l1" not in out
    assert out["results"] and all(r["excerpt"] and r["why"] for r in out["results"])
    return out


@pytest.fixture
def settings(base_settings, sample_store):
    return base_settings.with_(collection=sample_store.name)


def test_the_inspector_lists_the_tools_and_calls_a_server_it_launches_over_stdio(settings, tmp_path):
    db = tmp_path / "inspector-stdio.duckdb"
    served = serve_env(settings, db)
    config = tmp_path / "inspector.json"
    lookup_env = {k: v for k, v in served.items() if k.startswith("LOOKUP_")}
    # a host's configuration (docs/mcp.md, "Agent hosts"): the settings in its env block; the Inspector starts the
    # server from its own folder, the repository here
    server = {"command": sys.executable, "args": ["-m", "retrieval", "serve"], "env": lookup_env}
    config.write_text(json.dumps({"mcpServers": {"lookup-lab": server}}), encoding="utf-8")
    target = ["--config", str(config), "--server", "lookup-lab"]

    listed = inspector(*target, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert list(tools) == ["lookup_knowledge", "read_entry"]
    lookup = tools["lookup_knowledge"]
    assert lookup["inputSchema"]["properties"]["detail"]["enum"] == ["brief", "full"]
    assert lookup["outputSchema"] == json.loads(json.dumps(LOOKUP_OUTPUT))

    called = inspector(
        *target, "--method", "tools/call", "--tool-name", "lookup_knowledge", "--tool-arg", f"query={QUERY}", "top_k=5"
    )
    out = check_brief_answer(called)
    assert len(out["results"]) == 5 and out["answer"] == "supported answer in the knowledge base"
    rows = stored_rows(db)  # the Inspector closed the server, which flushed its spool
    assert [r["id"] for r in rows] == [out["invocation_id"]]
    assert rows[0]["session_tag"].startswith("inspector"), rows[0]["session_tag"]  # its clientInfo.name


BAD = [
    (["query=disk is full", "top_k=0"], "top_k must be between 1 and 50, got 0"),
    (["query=disk is full", "detail=everything"], "detail must be 'brief' or 'full', got str 'everything'"),
    (["query=disk is full", "k=3"], "unknown argument 'k'"),
    (["query=   "], "query is empty"),
]


def test_the_inspector_over_http_gets_both_detail_levels_and_refused_arguments_as_error_results(settings, tmp_path):
    db = tmp_path / "inspector-http.duckdb"
    port = free_port()
    proc = ServedProcess(["--transport", "http", "--port", str(port)], serve_env(settings, db))
    try:
        proc.wait_ready()
        target = [f"http://127.0.0.1:{port}/mcp", "--transport", "http"]
        call = [*target, "--method", "tools/call", "--tool-name", "lookup_knowledge", "--tool-arg"]
        refused = [(inspector(*call, *args), message) for args, message in BAD]
        brief = inspector(*call, f"query={QUERY}")
        full = inspector(*call, f"query={QUERY}", "detail=full")
        assert proc.proc.poll() is None, "a refused argument stopped the server"
    finally:
        assert proc.stop() == 0, proc.stderr
    for result, message in refused:
        assert result.get("isError") is True and message in result["content"][0]["text"], (message, result)
    out = check_brief_answer(brief)
    whole = full["structuredContent"]
    assert not full.get("isError") and whole["detail"] == "full" and whole["l1"]["candidates"] and whole["timings_ms"]
    jsonschema.validate(whole, LOOKUP_OUTPUT)
    assert [r["entry_id"] for r in whole["results"]] == [r["entry_id"] for r in out["results"]]
    assert len(full["content"][0]["text"]) > 2 * len(brief["content"][0]["text"])
    rows = stored_rows(db)
    assert sorted(r["id"] for r in rows) == sorted([out["invocation_id"], whole["invocation_id"]])  # refused: not recorded
