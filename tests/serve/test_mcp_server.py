"""The MCP server, driven by the SDK's real client over stdio and streamable HTTP against a real
`python -m retrieval serve` process: the test session's embedded Weaviate, the real model, real DuckDB files."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import duckdb
import httpx
import pytest

from retrieval.config import REPO_ROOT
from retrieval.engine.server import port_open
from retrieval.errors import ServeError
from retrieval.serve.api import open_knowledge_lookup
from retrieval.serve.http_transport import check_bind, is_loopback
from tests.conftest import free_port
from tests.helpers.mcp_process import (
    ServedProcess,
    call_message,
    http_client,
    serve_env,
    stdio_client,
    stored_rows,
    wait_for_rows,
)

QUERY = "Pod is crash looping and restarting"
TOKEN = "t0k3n-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def settings(base_settings, sample_store):
    return base_settings.with_(collection=sample_store.name)


@pytest.fixture(scope="module")
def served(settings, tmp_path_factory):
    """One HTTP server for the module, reusing the test session's Weaviate."""
    db = tmp_path_factory.mktemp("served") / "invocations.duckdb"
    port = free_port()
    proc = ServedProcess(["--transport", "http", "--port", str(port)], serve_env(settings, db))
    try:
        proc.wait_ready()
        yield proc, f"http://127.0.0.1:{port}/mcp", db
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def direct(settings, embedder, tmp_path_factory):
    """The same lookup in this process, for comparing served answers with direct ones (not recorded)."""
    kb = open_knowledge_lookup(settings, record=False, embedder=embedder)
    yield kb
    kb.close()


def run(coro):
    return asyncio.run(coro)


def test_http_lists_tools_answers_reads_an_entry_and_records_the_call_for_readers(served, direct):
    _, url, db = served

    async def talk():
        async with http_client(url, "test-http-agent") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            called = await client.call_tool("lookup_knowledge", {"query": QUERY, "top_k": 3, "detail": "full"})
            top = called.structured_content["results"][0]["entry_id"]
            entry = await client.call_tool("read_entry", {"entry_id": top})
            resource = await client.read_resource(f"kb://entry/{top}")
            return tools, called, entry, resource

    tools, called, entry, resource = run(talk())
    assert set(tools) == {"lookup_knowledge", "read_entry"}
    schema = tools["lookup_knowledge"].input_schema
    assert schema["required"] == ["query"] and schema["properties"]["top_k"]["type"] == "integer"
    assert schema["additionalProperties"] is False
    assert not called.is_error
    out = called.structured_content
    want = direct.lookup(QUERY, top_k=3)
    # With detail "full": the served results are the direct ones, every ResultItem.to_dict() field included, plus an
    # excerpt and a uri; the raw lists too (the default answer is brief: tests/serve/test_mcp_answer_size.py).
    assert [{k: r[k] for k in want.results[0].to_dict()} for r in out["results"]] == [r.to_dict() for r in want.results]
    assert all(r["excerpt"] and len(r["excerpt"]) <= 300 for r in out["results"])
    # From the best chunk's own text: neither the heading card nor the title line put in front of each section.
    assert not [r["excerpt"] for r in out["results"] if r["excerpt"].startswith(r["title"])]
    assert out["relevance"] == want.relevance.to_dict() and out["layer"] == want.layer
    assert out["hints"]["domains"] == list(want.l0.domains) and out["detail"] == "full"
    assert out["hints"]["matches"] == [m.to_dict() for m in want.l0.matches]
    assert [c["entry_id"] for c in out["l1"]["candidates"]] == [c.entry_id for c in want.l1.candidates]
    assert all(r["uri"] == "kb://entry/" + r["entry_id"] for r in out["results"])
    assert out["results"][0]["source"] in ("L0", "L1", "both") and out["relevance"]["semantic_support"] is True
    assert next(iter(out)) == "answer" and out["answer"] == "supported answer in the knowledge base"  # an agent reads it first
    assert called.content[0].text.startswith('{"answer":"supported answer in the knowledge base"')
    assert "answer" in tools["lookup_knowledge"].output_schema["required"]
    assert not entry.is_error
    whole = direct.entry(out["results"][0]["entry_id"])
    assert entry.structured_content["text"] == whole.text and entry.structured_content["title"] == whole.title
    assert resource.contents[0].text == whole.text

    rows, seconds = wait_for_rows(db, "id = ?", [out["invocation_id"]], timeout=60)
    print(f"a reader saw the served call after {seconds:.2f} s (load average {os.getloadavg()[0]:.1f})")
    assert len(rows) == 1, f"the served call did not reach {db} while the server ran"
    row = rows[0]
    assert row["session_tag"] == "test-http-agent"
    assert row["input"] == QUERY and row["layer"] == out["layer"] and row["top_entry_id"] == out["results"][0]["entry_id"]

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval",
            "sql",
            "--json",
            f"SELECT session_tag, top_entry_id FROM tool_invocation WHERE id = '{out['invocation_id']}'",
        ],
        cwd=REPO_ROOT,
        env=serve_env(direct.settings, db),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert '"session_tag": "test-http-agent"' in cli.stdout


BAD_CALLS = [
    ("lookup_knowledge", {"query": ""}, "query is empty"),
    ("lookup_knowledge", {"query": "   \n\t "}, "query is empty"),
    ("lookup_knowledge", {"query": "disk " * 500}, "over the 2000 character limit"),
    ("lookup_knowledge", {"query": 42}, "query must be a string, got int 42"),
    ("lookup_knowledge", {"query": ["disk full"]}, "query must be a string, got list"),
    ("lookup_knowledge", {}, "the argument 'query' is required"),
    ("lookup_knowledge", {"query": "disk full", "top_k": 0}, "top_k must be between 1 and 50, got 0"),
    ("lookup_knowledge", {"query": "disk full", "top_k": 51}, "top_k must be between 1 and 50, got 51"),
    ("lookup_knowledge", {"query": "disk full", "top_k": "3"}, "top_k must be a whole number between 1 and 50, got str '3'"),
    ("lookup_knowledge", {"query": "disk full", "top_k": 2.5}, "got float 2.5"),
    ("lookup_knowledge", {"query": "disk full", "top_k": True}, "got bool True"),
    ("lookup_knowledge", {"query": "disk full", "k": 3}, "unknown argument 'k': lookup_knowledge takes query, top_k, detail"),
    ("lookup_knowledge", {"query": "disk full", "detail": "all"}, "detail must be 'brief' or 'full', got str 'all'"),
    ("read_entry", {"entry_id": "kubernetes/NoSuchEntry"}, "entry_id 'kubernetes/NoSuchEntry' is not in the corpus (48 entries)"),
    ("read_entry", {"entry_id": 7}, "entry_id must be a string, got int 7"),
    ("read_entry", {}, "the argument 'entry_id' is required"),
    ("drop_everything", {}, "unknown tool 'drop_everything'"),
]


def test_bad_input_is_an_error_result_naming_the_problem_and_the_server_goes_on(served):
    proc, url, db = served

    async def talk():
        async with http_client(url, "test-bad-input") as client:
            answers = [await client.call_tool(tool, args) for tool, args, _ in BAD_CALLS]
            good = await client.call_tool("lookup_knowledge", {"query": "disk is full"})
            return answers, good

    answers, good = run(talk())
    for (tool, args, message), answer in zip(BAD_CALLS, answers, strict=True):
        assert answer.is_error, (tool, args)
        assert message in answer.content[0].text, (tool, args, answer.content[0].text)
    assert not good.is_error and good.structured_content["results"]
    assert proc.proc.poll() is None
    rows, _ = wait_for_rows(db, "session_tag = ?", ["test-bad-input"])
    assert [r["input"] for r in rows] == ["disk is full"]  # refused calls are not recorded


def test_unknown_resource_is_a_protocol_error(served):
    _, url, _ = served

    async def talk():
        async with http_client(url, "test-resource") as client:
            listed = await client.list_resources()
            with pytest.raises(Exception, match="not in the corpus"):
                await client.read_resource("kb://entry/nope/Nothing")
            return listed

    listed = run(talk())
    assert len(listed.resources) == 48 and all(r.uri.startswith("kb://entry/") for r in listed.resources)


def test_stdio_initialize_names_the_session_and_closing_stdin_flushes_every_row(settings, tmp_path):
    db = tmp_path / "stdio.duckdb"

    async def talk():
        async with stdio_client(serve_env(settings, db), "test-stdio-agent", mode="legacy") as client:
            assert client.server_info.name == "lookup-lab"
            tools = [t.name for t in (await client.list_tools()).tools]
            answers = [
                await client.call_tool("lookup_knowledge", {"query": q})
                for q in ("disk is full on the database volume", "TLS certificate expires soon")
            ]
            bad = await client.call_tool("lookup_knowledge", {"query": ""})
            entry = await client.call_tool("read_entry", {"entry_id": answers[0].structured_content["results"][0]["entry_id"]})
            return tools, answers, bad, entry

    tools, answers, bad, entry = run(talk())  # leaving the client closes the server's stdin
    assert tools == ["lookup_knowledge", "read_entry"]
    assert bad.is_error and "query is empty" in bad.content[0].text
    assert not entry.is_error and entry.structured_content["text"]
    ids = {a.structured_content["invocation_id"] for a in answers}
    rows = stored_rows(db)  # the server has exited: no background flusher is left to help
    assert {r["id"] for r in rows} == ids
    assert {r["session_tag"] for r in rows} == {"test-stdio-agent"}
    with duckdb.connect(str(db), read_only=True) as con:  # read_entry calls have their own table
        reads = con.execute("SELECT entry_id, session_tag FROM entry_read").fetchall()
    assert reads == [(entry.structured_content["entry_id"], "test-stdio-agent")]


def test_stdio_over_pipes_answers_pipelined_calls_refuses_a_malformed_line_and_flushes_on_sigterm(settings, tmp_path):
    """Under an agent host stdin and stdout are pipes, which the server's event loop reads and writes itself."""
    db = tmp_path / "pipes.duckdb"
    proc = ServedProcess([], serve_env(settings, db), pipes=True)

    def receive() -> dict:
        return proc.receive()[1]  # every line on the wire is JSON: nothing stray reached it

    try:
        proc.initialize("pipe-agent")
        proc.send(b"{this is not json\n")
        parse_error = receive()
        assert parse_error["id"] is None and parse_error["error"]["code"] == -32700, parse_error
        proc.send(call_message(1, "lookup_knowledge", {"query": "disk is full on the database volume"}))
        proc.send(call_message(2, "lookup_knowledge", {"query": "TLS certificate expires soon"}))
        answers = {m["id"]: m["result"] for m in (receive(), receive())}
        assert set(answers) == {1, 2} and not any(a.get("isError") for a in answers.values())
        assert proc.stop(signal.SIGTERM) == 0, proc.stderr
    finally:
        proc.kill()
    rows = stored_rows(db)
    assert {r["id"] for r in rows} == {a["structuredContent"]["invocation_id"] for a in answers.values()}
    assert {r["session_tag"] for r in rows} == {"pipe-agent"}


def test_sigint_stops_a_server_that_reused_weaviate_without_stopping_weaviate(settings, tmp_path, weaviate_client):
    db = tmp_path / "reuse.duckdb"
    port = free_port()
    proc = ServedProcess(["--transport", "http", "--port", str(port)], serve_env(settings, db))
    proc.wait_ready()

    async def talk():
        async with http_client(f"http://127.0.0.1:{port}/mcp", "test-sigint") as client:
            return await client.call_tool("lookup_knowledge", {"query": "replica set has no primary"})

    answer = run(talk())
    assert proc.stop(signal.SIGINT) == 0, proc.stderr
    assert [r["id"] for r in stored_rows(db)] == [answer.structured_content["invocation_id"]]
    assert not port_open("127.0.0.1", port)
    assert weaviate_client.is_ready() and port_open("127.0.0.1", settings.embedded_port)  # not its server to stop


def test_sigterm_flushes_the_spool_and_stops_the_weaviate_it_started(settings, tmp_path):
    own = settings.with_(data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port())
    db = tmp_path / "own.duckdb"
    port = free_port()
    proc = ServedProcess(["--transport", "http", "--port", str(port)], serve_env(own, db))
    proc.wait_ready()
    assert port_open("127.0.0.1", own.embedded_port) and port_open("127.0.0.1", own.embedded_grpc_port)

    async def talk():
        async with http_client(f"http://127.0.0.1:{port}/mcp", "test-sigterm") as client:
            return [await client.call_tool("lookup_knowledge", {"query": f"disk is full {i}"}) for i in range(3)]

    answers = run(talk())
    t0 = time.monotonic()
    assert proc.stop(signal.SIGTERM) == 0, proc.stderr
    assert time.monotonic() - t0 < 30
    assert {r["id"] for r in stored_rows(db)} == {a.structured_content["invocation_id"] for a in answers}
    assert not list((db.parent / (db.name + ".spool")).glob("*")), "rows left in the spool"
    assert not port_open("127.0.0.1", own.embedded_port) and not port_open("127.0.0.1", own.embedded_grpc_port)


@pytest.mark.parametrize(
    "host, token, refused",
    [
        ("127.0.0.1", None, None),
        ("localhost", None, None),
        ("::1", None, None),
        ("127.0.0.2", None, None),
        ("0.0.0.0", None, "LOOKUP_SERVER_TOKEN"),
        ("::", None, "LOOKUP_SERVER_TOKEN"),
        ("192.168.1.4", None, "LOOKUP_SERVER_TOKEN"),
        ("my-host.example", None, "LOOKUP_SERVER_TOKEN"),
        ("0.0.0.0", TOKEN, None),
        ("127.0.0.1", "short", "at least 16"),
    ],
)
def test_bind_rules(host, token, refused):
    assert is_loopback(host) is (host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    if refused is None:
        check_bind(host, token)
    else:
        with pytest.raises(ServeError, match=refused):
            check_bind(host, token)


def test_a_non_loopback_bind_without_a_token_refuses_to_start(settings, tmp_path):
    port = free_port()
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "retrieval", "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(port)],
        cwd=REPO_ROOT,
        env=serve_env(settings, tmp_path / "x.duckdb"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "--host 0.0.0.0 is reachable from other machines: set LOOKUP_SERVER_TOKEN" in out.stderr
    assert time.monotonic() - t0 < 30  # refused before loading the model
    assert not (tmp_path / "x.duckdb").exists() and not port_open("127.0.0.1", port)


def test_with_a_token_a_non_loopback_server_answers_only_requests_that_carry_it(settings, tmp_path):
    db = tmp_path / "token.duckdb"
    port = free_port()
    proc = ServedProcess(
        ["--transport", "http", "--host", "0.0.0.0", "--port", str(port)], serve_env(settings, db, LOOKUP_SERVER_TOKEN=TOKEN)
    )
    try:
        proc.wait_ready()
        url = f"http://127.0.0.1:{port}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
            response = httpx.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})
            assert response.status_code == 401 and "Bearer" in response.headers["www-authenticate"]

        async def talk():
            async with http_client(url, "test-token", token=TOKEN) as client:
                return await client.call_tool("lookup_knowledge", {"query": "disk is full"})

        assert not run(talk()).is_error
    finally:
        assert proc.stop() == 0
    assert [r["session_tag"] for r in stored_rows(db)] == ["test-token"]


CLIENTS, CALLS = 20, 50


def test_twenty_http_clients_times_fifty_calls_store_a_thousand_rows_none_lost_or_twice(served):
    _, url, db = served
    queries = ["disk is full", "pod keeps restarting", "certificate expired", "replica lag is high", "DNS lookups fail"]

    async def one_client(i: int) -> list[str]:
        async with http_client(url, f"load-{i:02d}") as client:
            ids = []
            for j in range(CALLS):
                answer = await client.call_tool("lookup_knowledge", {"query": queries[(i + j) % len(queries)]})
                assert not answer.is_error, answer.content[0].text
                ids.append(answer.structured_content["invocation_id"])
            return ids

    async def everyone():
        return await asyncio.gather(*(one_client(i) for i in range(CLIENTS)))

    t0 = time.monotonic()
    per_client = run(everyone())
    seconds = time.monotonic() - t0
    served_ids = [x for ids in per_client for x in ids]
    assert len(served_ids) == len(set(served_ids)) == CLIENTS * CALLS
    rows, _ = wait_for_rows(db, "session_tag LIKE 'load-%'", [], n=CLIENTS * CALLS, timeout=15)
    stored = [r["id"] for r in rows]
    assert len(stored) == len(set(stored)) == CLIENTS * CALLS, f"{len(stored)} rows, {len(set(stored))} distinct"
    assert set(stored) == set(served_ids)
    by_client = {}
    for r in rows:
        by_client[r["session_tag"]] = by_client.get(r["session_tag"], 0) + 1
    assert by_client == {f"load-{i:02d}": CALLS for i in range(CLIENTS)}
    print(f"{CLIENTS * CALLS} calls from {CLIENTS} clients in {seconds:.1f} s ({CLIENTS * CALLS / seconds:.0f} calls/s)")


def test_an_unanswerable_query_says_so_in_its_first_field(served):
    _, url, _ = served

    async def talk():
        async with http_client(url, "test-http-agent") as client:
            return await client.call_tool("lookup_knowledge", {"query": "how do I bake sourdough bread with rye flour"})

    called = run(talk())
    out = called.structured_content
    assert not called.is_error and next(iter(out)) == "answer"
    assert out["answer"] == "no supported answer in the knowledge base" and out["relevance"]["semantic_support"] is False
    assert out["results"]  # the evidence is still listed: the nearest entries
    assert called.content[0].text.startswith('{"answer":"no supported answer in the knowledge base"')
