"""Every writer of the invocation store at once, as real processes on one data directory and DuckDB file: the app with
lookups typed in chromium, CLI lookups the standing server's keeper answers, two MCP servers over HTTP each driven by
MCP SDK clients, and a `sql` reader throughout. Then a kill -9 of an MCP server with calls in flight."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from retrieval.bench.load import LoadPlan, drive, eval_queries
from retrieval.config import child_environment
from retrieval.engine.ports import free_port

from ..conftest import SAMPLE_CORPUS
from ..helpers.browser import assert_no_exception, open_connected, start_app, type_query
from ..helpers.cli import cli
from ..helpers.mcp_process import ServedProcess, http_client, serve_env, stored_rows
from ..helpers.processes import stop_servers, wait_until
from ..helpers.writers import (
    Schedule,
    SqlReader,
    cli_lookups,
    described,
    lookup_env,
    mcp_clients,
    spooled_files,
    stored,
    trouble_in,
    writer_thread,
)

SHARES = {"app": 8, "cli": 16, "mcp-a": 24, "mcp-b": 24}  # calls each writer makes at least
MCP_CLIENTS = 3  # SDK clients per MCP server


@pytest.fixture
def standing(tmp_path):
    """The shared settings of a standing server of this test's own, the sample corpus indexed in it, its keeper ready
    to answer CLI lookups; (settings, the keeper's log). Stopped after."""
    lookup = lookup_env(tmp_path, SAMPLE_CORPUS, "Writers")
    try:
        started = cli("server", "start", "--json", env=lookup)
        assert started.returncode == 0, started.stderr
        ingested = cli("ingest", env=lookup)
        assert ingested.returncode == 0, ingested.stderr
        log = next((tmp_path / "data").rglob("standing-server.log"))
        wait_until(lambda: "warm lookups ready" in log.read_text(errors="replace"), 180, f"the keeper is ready ({log})")
        yield lookup, log
    finally:
        cli("server", "stop", env=lookup)
        stop_servers(int(lookup["LOOKUP_WEAVIATE_PORT"]))


def app_lookups(page, schedule: Schedule, queries: list[str]) -> None:
    """The app's writer: lookups typed in chromium, each answered on the page (and so recorded) before the next."""
    try:
        while (i := schedule.next_call("app")) is not None:
            type_query(page, queries[i % len(queries)])
            assert_no_exception(page, f"the app's lookup {i}")
            schedule.answered_one("app")
    except Exception as exc:
        schedule.give_up("app", described(exc))


def write_all_at_once(page, urls: dict[str, str], lookup: dict[str, str]) -> tuple[Schedule, SqlReader]:
    """Every writer's calls at the same time (MCP writers: name -> URL), the sql reader running before, during and
    after them."""
    queries = eval_queries()
    schedule, reader = Schedule(SHARES), SqlReader(lookup)
    threads = [writer_thread(schedule, "cli", lambda: cli_lookups(schedule, "cli", queries, lookup))]
    for name, url in urls.items():
        threads.append(writer_thread(schedule, name, lambda n=name, u=url: mcp_clients(schedule, n, u, queries, MCP_CLIENTS)))
    reading = reader.start()
    wait_until(lambda: reader.counts or reader.failures, 180, "the sql reader has answered once")
    started = time.monotonic()
    schedule.go.set()
    app_lookups(page, schedule, queries)
    for thread in threads:
        thread.join()
    print(f"every writer: the calls took {time.monotonic() - started:.1f} s")
    ran = len(reader.counts)
    wait_until(lambda: len(reader.counts) + len(reader.failures) > ran, 180, "the sql reader has answered after the writers")
    reader.stop.set()
    reading.join()
    return schedule, reader


@pytest.mark.slow
@pytest.mark.browser
def test_every_writer_at_once_stores_each_answered_call_once_and_none_fails_on_the_lock(standing, tmp_path, base_settings, page):
    lookup, keeper_log = standing
    db = Path(lookup["LOOKUP_DB_PATH"])
    ports = {"mcp-a": free_port(), "mcp-b": free_port()}
    servers = {n: ServedProcess(["--transport", "http", "--port", str(p)], child_environment(**lookup)) for n, p in ports.items()}
    weaviate = {k: lookup[k] for k in ("LOOKUP_WEAVIATE_PORT", "LOOKUP_WEAVIATE_GRPC_PORT")}
    app = start_app(
        tmp_path,
        base_settings,
        collection=lookup["LOOKUP_COLLECTION"],
        corpus=SAMPLE_CORPUS,
        weaviate_env=weaviate,
        env_extra={"LOOKUP_SESSION_TAG": "app"},
    )
    try:
        for server in servers.values():
            server.wait_ready()
        open_connected(page, app)
        schedule, reader = write_all_at_once(page, {n: f"http://127.0.0.1:{p}/mcp" for n, p in ports.items()}, lookup)
    finally:
        stopped = cli("server", "stop", env=lookup)
        exits = {name: server.stop() for name, server in servers.items()}
        app.stop()
    assert stopped.returncode == 0, stopped.stderr
    assert exits == dict.fromkeys(servers, 0), exits

    got = stored(db)
    waiting = spooled_files(db)
    print(
        f"every writer: answered {dict(schedule.answered)}, stored {got.per_tag} ({got.rows} rows), "
        f"sql reader runs {len(reader.counts)} (counts {reader.counts[0]}..{reader.counts[-1]})"
    )
    assert not schedule.failures, (schedule.failures, {name: server.stderr[-3000:] for name, server in servers.items()})
    assert not reader.failures, reader.failures
    assert reader.counts == sorted(reader.counts), reader.counts  # a reader never sees rows go away
    assert all(schedule.answered[w] >= n for w, n in SHARES.items()), schedule.answered
    assert got.repeated_ids == ()
    assert got.per_tag == dict(schedule.answered)
    assert not {name: n for name, n in waiting.items() if n}, waiting
    outputs = {name: server.stderr for name, server in servers.items()}
    outputs |= {"app": app.log.read_text(errors="replace"), "keeper": keeper_log.read_text(errors="replace")}
    assert not {name: trouble_in(text) for name, text in outputs.items() if trouble_in(text)}


@pytest.mark.slow
def test_a_killed_mcp_writer_loses_at_most_its_calls_in_flight_and_the_next_start_moves_its_spool_in(
    base_settings, sample_store, tmp_path
):
    db = tmp_path / "invocations.duckdb"
    env = serve_env(base_settings.with_(collection=sample_store.name), db)
    port = free_port()
    killed = ServedProcess(["--transport", "http", "--port", str(port)], env)
    try:
        killed.wait_ready()
        url = f"http://127.0.0.1:{port}/mcp"
        plan = LoadPlan(clients=4, calls=10, kill=True)
        clients = drive(plan, lambda: http_client(url, "killed"), eval_queries(), killed.proc.pid, print)
        with ThreadPoolExecutor(1) as own:  # a thread of its own: chromium's sync API keeps an event loop in this one
            out = own.submit(asyncio.run, clients).result()
        killed.proc.wait()
    finally:
        killed.kill()
    answered, at_kill, in_flight = out["all_calls"]["answered"], out["kill"]["answered_at_kill"], out["kill"]["in_flight"]
    assert in_flight > 0, out  # the kill came while calls were in flight
    left = sum(spooled_files(db).values())

    restarted = ServedProcess(["--transport", "http", "--port", str(free_port())], env)
    try:
        restarted.wait_ready()
        wait_until(lambda: len(stored_rows(db, "session_tag = 'killed'")) >= answered, 120, "every answered call is stored")
    finally:
        assert restarted.stop() == 0, restarted.stderr
    rows = stored_rows(db, "session_tag = 'killed'")
    print(f"kill -9: {answered} answered ({at_kill} at the kill), {in_flight} in flight, {left} spooled, {len(rows)} stored")
    assert answered <= len(rows) <= at_kill + in_flight
    assert len({r["id"] for r in rows}) == len(rows)
    assert sum(spooled_files(db).values()) == 0, spooled_files(db)
    assert not trouble_in(restarted.stderr), restarted.stderr
