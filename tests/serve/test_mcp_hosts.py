"""Installed for agent hosts: the host configurations of docs/mcp.md, run as a host runs them.

The package is installed into a virtual environment of its own (from a copy of the source), and each
configuration is launched from `/` with only its `env` block (the SDK's stdio client adds what hosts add:
HOME, PATH, SHELL, TERM). Its paths are replaced by the test's: the settings file names the test session's
Weaviate and indexed collection, so an answer from L1 shows that LOOKUP_CONFIG was read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from retrieval.config import REPO_ROOT
from tests.conftest import SAMPLE_CORPUS, free_port
from tests.helpers.mcp_process import http_client, stored_rows

from ..helpers.source_files import NOT_SOURCE

PLACEHOLDER = "/opt/lookup-lab"


def readme_host_config(name: str) -> dict:
    """The JSON block that follows `<!-- host-config: NAME -->` in docs/mcp.md."""
    text = (REPO_ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- host-config: {re.escape(name)} -->\s*```json\n(.*?)```", text, re.S)
    assert found, f"docs/mcp.md has no host configuration {name!r}"
    return json.loads(found.group(1))["mcpServers"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A virtual environment with the package installed (not editable): what `pip install` gives a user."""
    work = tmp_path_factory.mktemp("hosts")
    shutil.copytree(REPO_ROOT, work / "src", ignore=NOT_SOURCE)
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(work / "dist"), str(work / "src")]
    subprocess.run(build, check=True, timeout=600)
    (wheel,) = (work / "dist").glob("lookup_lab-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(work / "venv")], check=True, timeout=300)
    install = [str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True, timeout=600, cwd=work)
    return work / "venv"


@pytest.fixture
def place(tmp_path, base_settings, sample_store) -> dict[str, str]:
    """The test's stand-ins for docs/mcp.md's /opt/lookup-lab paths: a settings file naming the session's Weaviate (by
    URL: its data directory is not the one these settings name, so as an embedded server it would not be theirs)."""
    config = tmp_path / "lookup.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "collection": sample_store.name,
                "weaviate_url": f"http://127.0.0.1:{base_settings.embedded_port}",
                "remote_grpc_port": base_settings.embedded_grpc_port,
            }
        ),
        encoding="utf-8",
    )
    return {
        f"{PLACEHOLDER}/lookup.yaml": str(config),
        f"{PLACEHOLDER}/corpus": str(SAMPLE_CORPUS),
        f"{PLACEHOLDER}/data": str(tmp_path / "data"),
    }


def localized(server: dict, venv: Path, place: dict[str, str]) -> tuple[str, list[str], dict[str, str]]:
    command = server["command"].replace(f"{PLACEHOLDER}/venv", str(venv))
    env = {k: place.get(v, v) for k, v in server["env"].items()}
    assert set(env) == {"LOOKUP_CONFIG", "LOOKUP_CORPUS_DIR", "LOOKUP_DATA_DIR"} and all(os.path.isabs(v) for v in env.values())
    return command, list(server["args"]), env


@pytest.mark.parametrize("config", ["claude-desktop", "inspector-stdio"])
def test_a_host_launch_from_root_with_only_the_env_block_answers_a_lookup(venv, place, config):
    command, args, env = localized(readme_host_config(config)["lookup-lab"], venv, place)
    params = StdioServerParameters(command=command, args=args, env=env, cwd="/")

    async def talk():
        async with Client(params, mode="legacy", client_info=Implementation(name=f"host-{config}", version="1")) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            return tools, await client.call_tool("lookup_knowledge", {"query": "Pod is crash looping and restarting"})

    import anyio

    tools, answer = anyio.run(talk)
    assert tools == ["lookup_knowledge", "read_entry"]
    assert not answer.is_error, answer.content[0].text
    out = answer.structured_content
    assert out["results"] and "L1" in out["layer"], out["layer"]  # the settings file's collection was searched
    rows = stored_rows(Path(env["LOOKUP_DATA_DIR"]) / "invocations.duckdb")
    assert [r["session_tag"] for r in rows] == [f"host-{config}"]


def test_the_inspector_http_configuration_reaches_a_server_started_from_root(venv, place):
    (server,) = readme_host_config("inspector-http").values()
    port = free_port()
    url = server["url"].replace(":8765/", f":{port}/")
    stdio_config = readme_host_config("inspector-stdio")["lookup-lab"]
    _, _, env = localized(stdio_config, venv, place)
    minimal = {"HOME": os.environ["HOME"], "PATH": os.environ["PATH"], **env}
    proc = subprocess.Popen(
        [str(venv / "bin" / "lookup-lab"), "serve", "--transport", "http", "--port", str(port)],
        cwd="/",
        env=minimal,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in proc.stderr], daemon=True).start()
    try:
        deadline = time.monotonic() + 180
        while not any("ready:" in line for line in lines) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any("ready:" in line for line in lines), "".join(lines)

        async def talk():
            async with http_client(url, "host-inspector-http") as client:
                return await client.call_tool("lookup_knowledge", {"query": "disk is full on the database volume"})

        import anyio

        answer = anyio.run(talk)
        assert server["type"] == "streamable-http"
        assert not answer.is_error and "L1" in answer.structured_content["layer"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, "".join(lines)
