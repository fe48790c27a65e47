"""The MCP server's life as an agent host sees it: answered at once, never leaving a Weaviate behind.

Each test starts `python -m retrieval serve` over stdio with a data directory and ports of its own, so the
server launches its own embedded Weaviate; what is left running afterwards is read from the process table
(`ps`), not from the code under test. The close sequence is the TypeScript SDK's: close stdin, wait 2 s,
SIGTERM, wait 2 s, SIGKILL, all to the server's pid alone (not its process group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from retrieval.config import REPO_ROOT, Settings
from retrieval.engine.server import embedded_binary, port_open
from tests.conftest import free_port
from tests.helpers.mcp_process import ServedProcess, serve_env, stdio_client

AGENT = "lifecycle-agent"
GONE_WITHIN_S = 30.0  # a signalled Weaviate finishes its shutdown alone: generous, the machine is shared
# The tests that the server leaves on its own once stdin closes wait this long before SIGTERM: the SDK's 2 s is a
# speed figure (printed), and a busy machine stretches the flush and Weaviate's stop past it.
STDIN_GRACE_S = 30.0


def weaviate_pids(binary_name: str, port: int) -> list[tuple[int, int]]:
    """(pid, ppid) of every live process of the Weaviate binary serving `port`, from `ps`."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pid, ppid, stat, *args = line.split()
        if stat.startswith("Z") or not args or os.path.basename(args[0]) != binary_name:
            continue
        if "--port" in args and args[args.index("--port") + 1] == str(port):
            found.append((int(pid), int(ppid)))
    return found


def reap(binary_name: str, port: int) -> list[int]:
    """SIGKILL what a failed test left on the port (so that it fails alone); returns those pids."""
    left = [pid for pid, _ in weaviate_pids(binary_name, port)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def wait_until(predicate, timeout_s: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def served(env: dict[str, str], *args: str) -> ServedProcess:
    """`serve ARGS` with its stdin and stdout on pipes, as an agent host starts it."""
    return ServedProcess(list(args), env, pipes=True)


@pytest.fixture
def own(base_settings, tmp_path) -> Settings:
    """Settings whose Weaviate nobody runs yet: the served process starts (and owns) it."""
    return base_settings.with_(data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port())


def test_initialize_and_tools_list_are_answered_while_loading_and_an_early_call_is_told_so(own, tmp_path):
    server = served(serve_env(own, tmp_path / "db.duckdb"), "--load-wait", "0.05")
    try:
        initialized = server.initialize(AGENT)
        server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        listed_at, listed = server.receive()
        assert [t["name"] for t in listed["result"]["tools"]] == ["lookup_knowledge", "read_entry"]
        _, early = server.call(2, "lookup_knowledge", {"query": "disk is full"})
        ready_then = server.logged_at("ready:")
        # Answered before the model and Weaviate were loaded: proved by the order, not by a clock.
        assert ready_then is None, f"ready was logged before the first call's answer:\n{server.stderr}"
        assert early["result"]["isError"] is True
        assert "still loading" in early["result"]["content"][0]["text"]
        server.wait_ready()
        assert server.logged_at("ready:") > listed_at
        _, later = server.call(3, "lookup_knowledge", {"query": "disk is full", "top_k": 2.0})
        assert not later["result"].get("isError"), later
        assert len(later["result"]["structuredContent"]["results"]) == 2  # top_k 2.0 is JSON Schema's integer 2
        print(f"initialize answered {initialized:.2f} s after spawn (load average {os.getloadavg()[0]:.1f})")
        assert initialized < 60  # generous: the figure is the bench's (bench --server: initialize_ms)
        step = server.close_like_the_typescript_sdk(grace_s=STDIN_GRACE_S)
        print(f"left {server.closed_after_s:.2f} s after stdin closed (load average {os.getloadavg()[0]:.1f})")
        assert step == "stdin closed", f"idle, the server outlived its closed stdin by {STDIN_GRACE_S} s:\n{server.stderr}"
    finally:
        server.kill()
    assert "stopped" in server.stderr


@pytest.mark.parametrize("when", ["1 s", "5 s", "ready"])
def test_the_typescript_sdk_close_sequence_leaves_no_weaviate_behind(own, tmp_path, when):
    binary = embedded_binary(own).name
    server = served(serve_env(own, tmp_path / "db.duckdb"))
    try:
        server.initialize(AGENT)
        if when == "ready":
            server.wait_ready()
            assert weaviate_pids(binary, own.embedded_port), f"the server did not start its own Weaviate:\n{server.stderr}"
        else:
            time.sleep(float(when.split()[0]))
        step = server.close_like_the_typescript_sdk()
    finally:
        server.kill()
    gone = wait_until(lambda: not weaviate_pids(binary, own.embedded_port), GONE_WITHIN_S)
    left = reap(binary, own.embedded_port)
    assert gone, f"Weaviate {left} outlived the server (ended by {step}):\n{server.stderr}"
    assert not port_open("127.0.0.1", own.embedded_port) and not port_open("127.0.0.1", own.embedded_grpc_port)


def test_sigkill_of_the_server_takes_its_weaviate_down_too(own, tmp_path):
    binary = embedded_binary(own).name
    server = served(serve_env(own, tmp_path / "db.duckdb"))
    try:
        server.initialize(AGENT)
        assert wait_until(lambda: bool(weaviate_pids(binary, own.embedded_port)), 120), server.stderr
        ((pid, parent),) = weaviate_pids(binary, own.embedded_port)
        assert parent == server.proc.pid
        server.proc.kill()  # SIGKILL: no handler, no atexit, no finally
        server.proc.wait()
    finally:
        server.kill()
    gone = wait_until(lambda: not weaviate_pids(binary, own.embedded_port), GONE_WITHIN_S)
    reap(binary, own.embedded_port)
    assert gone, f"Weaviate {pid} survived its owner's SIGKILL:\n{server.stderr}"


ORPHAN_MAKER = """
import sys, time
from retrieval.config import load_settings
from retrieval.engine.server import DataDirLock
import weaviate
from retrieval.engine.server import EMBEDDED_ENV, embedded_binary
s = load_settings()
s.weaviate_data_dir.mkdir(parents=True, exist_ok=True)
DataDirLock.acquire(s.weaviate_data_dir, s.embedded_port)
# weaviate-client's own launch: no parent-death signal, unlike the project's own launcher
client = weaviate.connect_to_embedded(version=s.weaviate_version, binary_path=str(embedded_binary(s).parent),
    persistence_data_path=str(s.weaviate_data_dir), port=s.embedded_port, grpc_port=s.embedded_grpc_port,
    environment_variables=dict(EMBEDDED_ENV))
print(client._connection.embedded_db.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_later_start_stops_and_replaces_an_orphan_of_ours(own, tmp_path):
    """An orphan as older versions left one: a Weaviate started without the parent-death signal, whose
    owner was then SIGKILLed. The next server finds it (lock free, our binary on the port) and replaces it."""
    binary = embedded_binary(own).name
    env = serve_env(own, tmp_path / "db.duckdb")
    maker = subprocess.Popen([sys.executable, "-c", ORPHAN_MAKER], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        orphan = int(maker.stdout.readline())
        maker.kill()
        maker.wait()
        assert [p for p, _ in weaviate_pids(binary, own.embedded_port)] == [orphan]  # its owner is dead, it runs on
        server = served(env)
        try:
            server.initialize(AGENT)
            server.wait_ready()
            assert wait_until(lambda: orphan not in [p for p, _ in weaviate_pids(binary, own.embedded_port)], 30)
            (now,) = weaviate_pids(binary, own.embedded_port)
            assert now[1] == server.proc.pid, "the new Weaviate is not the server's own"
            _, answer = server.call(1, "lookup_knowledge", {"query": "disk is full"})
            assert not answer["result"].get("isError"), answer
            assert server.close_like_the_typescript_sdk(grace_s=STDIN_GRACE_S) == "stdin closed", server.stderr
        finally:
            server.kill()
        assert wait_until(lambda: not weaviate_pids(binary, own.embedded_port), GONE_WITHIN_S)
    finally:
        if maker.poll() is None:
            maker.kill()
        reap(binary, own.embedded_port)


def test_an_unparseable_line_gets_a_parse_error_with_id_null_and_a_stderr_line(base_settings, weaviate_client, tmp_path):
    server = served(serve_env(base_settings, tmp_path / "db.duckdb"))
    try:
        server.initialize(AGENT)
        server.send(b"{this is not json\n")
        _, reply = server.receive()
        assert reply["id"] is None and reply["error"]["code"] == -32700, reply
        server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        _, listed = server.receive()
        assert listed["id"] == 1  # the server went on
        assert wait_until(lambda: server.logged_at("{this is not json") is not None, 10), server.stderr
    finally:
        server.proc.stdin.close()
        server.proc.wait(timeout=60)


def test_the_sdk_clients_own_start_and_close_leave_no_weaviate_behind(own, tmp_path):
    """The Python SDK's stdio client: it spawns the server, initializes, and on leaving closes stdin, waits 2 s,
    then signals the whole process group."""
    import anyio

    binary = embedded_binary(own).name
    env = serve_env(own, tmp_path / "db.duckdb")
    seen: dict[str, float] = {}

    async def talk():
        t0 = time.monotonic()
        async with stdio_client(env, "sdk-lifecycle") as client:
            seen["initialized_s"] = time.monotonic() - t0
            answer = await client.call_tool("lookup_knowledge", {"query": "disk is full"})
            seen["weaviate"] = len(weaviate_pids(binary, own.embedded_port))
            t1 = time.monotonic()
        seen["closed_s"] = time.monotonic() - t1
        return answer

    answer = anyio.run(talk)
    assert not answer.is_error, answer.content[0].text
    assert seen["weaviate"] == 1, "the server did not start its own Weaviate"
    print(f"SDK client: initialized {seen['initialized_s']:.2f} s after spawn, closed in {seen['closed_s']:.2f} s")
    gone = wait_until(lambda: not weaviate_pids(binary, own.embedded_port), GONE_WITHIN_S)
    reap(binary, own.embedded_port)
    assert gone


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_while_weaviate_starts_stops_the_server_and_its_weaviate(own, tmp_path, transport):
    """SIGTERM as soon as the server's Weaviate shows in the process table: loading is under way."""
    binary = embedded_binary(own).name
    args = ["--transport", "http", "--port", str(free_port())] if transport == "http" else []
    server = served(serve_env(own, tmp_path / "db.duckdb"), *args)
    try:
        if transport == "stdio":
            server.initialize(AGENT)
        assert wait_until(lambda: bool(weaviate_pids(binary, own.embedded_port)), 120), server.stderr
        assert server.logged_at("ready:") is None, "loading was over before the signal: the test proves nothing"
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        seconds = time.monotonic() - t0
    finally:
        server.kill()
    gone = wait_until(lambda: not weaviate_pids(binary, own.embedded_port), GONE_WITHIN_S)
    reap(binary, own.embedded_port)
    print(f"{transport}: SIGTERM during loading: exit {code} after {seconds:.2f} s")
    assert code == 0, server.stderr
    assert gone, server.stderr
