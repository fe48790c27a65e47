"""The DuckDB memory budget: parsed settings, and every connection the project opens carrying it (real files)."""

from __future__ import annotations

import re

import duckdb
import pytest

from retrieval.config import db_budget, load_settings
from retrieval.errors import ConfigError
from retrieval.lab.runs import RunStore
from retrieval.records.db_budget import connect
from retrieval.records.invocations import InvocationStore
from retrieval.records.sql_console import run_readonly
from retrieval.types.budget import DbBudget, parse_size, temp_directory

SETTINGS_SQL = (
    "SELECT current_setting('memory_limit'), current_setting('threads'), current_setting('temp_directory'), "
    "current_setting('max_temp_directory_size')"
)


def limit_bytes(shown: str) -> int:
    """DuckDB shows its memory_limit in binary units, e.g. '91.5 MiB'."""
    return parse_size(shown.replace(" ", ""), name="memory_limit")


@pytest.mark.parametrize(
    ("text", "size"),
    [("1GB", 10**9), ("256MB", 256 * 10**6), ("1.5GiB", 3 * 2**29), ("64mib", 64 * 2**20), (" 2 GB ", 2 * 10**9)],
)
def test_sizes_are_read_as_duckdb_reads_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "1XB", "", "-1GB", "1 GB 2"])
def test_a_bad_size_names_the_setting_and_the_value(text):
    with pytest.raises(ConfigError, match=re.escape(f"LOOKUP_DB_MEMORY_LIMIT: {text!r} is not a size such as 1GB")):
        parse_size(text)


def test_a_budget_too_small_to_work_in_is_refused():
    with pytest.raises(ConfigError, match=re.escape("below the smallest budget")):
        DbBudget("4MB")


def test_the_settings_come_from_the_environment_and_are_checked():
    assert db_budget(load_settings(env={})) == DbBudget("1GB", 2)
    assert db_budget(load_settings(env={"LOOKUP_DB_MEMORY_LIMIT": "512MB", "LOOKUP_DB_THREADS": "1"})) == DbBudget("512MB", 1)
    with pytest.raises(ConfigError, match=re.escape("LOOKUP_DB_MEMORY_LIMIT: 'half' is not a size")):
        load_settings(env={"LOOKUP_DB_MEMORY_LIMIT": "half"})
    with pytest.raises(ConfigError, match=re.escape("LOOKUP_DB_THREADS: 0 must be at least 1")):
        load_settings(env={"LOOKUP_DB_THREADS": "0"})
    with pytest.raises(ConfigError, match=re.escape("LOOKUP_DB_THREADS: db_threads = 'two'")):
        load_settings(env={"LOOKUP_DB_THREADS": "two"})


def test_a_connection_carries_the_budget_and_spills_beside_the_file(tmp_path):
    db = tmp_path / "x.duckdb"
    with connect(db, DbBudget("96MB", 1)) as con:
        limit, threads, temp, _ = con.execute(SETTINGS_SQL).fetchone()
    assert abs(limit_bytes(limit) - 96 * 10**6) < 2**20 and threads == 1
    assert temp == str(temp_directory(db)) == str(tmp_path / "x.duckdb.tmp")
    with connect(db, DbBudget("96MB", 1), read_only=True, spill=False) as con:
        assert con.execute(SETTINGS_SQL).fetchone()[3] == "0 bytes"  # nothing spills: over the budget is an error


def test_every_connection_of_the_store_dashboard_console_and_run_store_is_within_budget(tmp_path, monkeypatch):
    """The recorder and flusher (read-write), the dashboard's reads, the SQL console and the lab's run store."""
    from retrieval.records.dashboard import filter_options

    seen: list[tuple] = []
    real_connect = duckdb.connect

    def spy(database, read_only=False, config=None):
        seen.append((str(database), read_only, dict(config or {})))
        return real_connect(database, read_only=read_only, config=config or {})

    monkeypatch.setattr(duckdb, "connect", spy)  # a real DuckDB behind it: this only records the options given
    monkeypatch.setenv("LOOKUP_DB_MEMORY_LIMIT", "128MB")
    monkeypatch.setenv("LOOKUP_DB_THREADS", "1")
    store = InvocationStore(tmp_path / "inv.duckdb")  # no budget given: the settings' (here the environment's)
    assert store.budget == DbBudget("128MB", 1)
    store.flush()
    filter_options(store)
    run_readonly(store, "SELECT count(*) FROM tool_invocation")
    RunStore(tmp_path / "runs.duckdb").list_runs()
    # the store's writes attach the file to an in-memory connection (for its row group size): still within budget
    assert {p.rsplit("/", 1)[-1] for p, _, _ in seen} == {"inv.duckdb", "runs.duckdb", ":memory:"}
    assert all(not read_only for p, read_only, _ in seen if p == ":memory:")
    assert any(read_only for _, read_only, _ in seen) and any(not read_only for _, read_only, _ in seen)
    for path, _, config in seen:
        assert config["threads"] == 1, path
        assert parse_size(config["memory_limit"]) <= 128 * 10**6, path


def test_the_console_never_gets_more_than_the_store(tmp_path):
    store = InvocationStore(tmp_path / "inv.duckdb", budget=DbBudget("100MB", 1))
    shown = run_readonly(store, SETTINGS_SQL).frame.iloc[0].tolist()
    assert abs(limit_bytes(shown[0]) - 100 * 10**6) < 2**20 and shown[3] == "0 bytes"
    roomy = InvocationStore(tmp_path / "roomy.duckdb", budget=DbBudget("2GB", 1))
    assert abs(limit_bytes(run_readonly(roomy, SETTINGS_SQL).frame.iloc[0, 0]) - 256 * 10**6) < 2**20


def test_a_connect_waits_while_a_store_writer_of_this_process_holds_the_file(tmp_path):
    """A store writer attaches the file (for its row group size); DuckDB then refuses a plain connect to it in the same
    process ("Unique file handle conflict") until the writer closes: connect_retrying waits for it, as for a lock."""
    import threading

    from retrieval.records.db_budget import connect_retrying

    path, budget = tmp_path / "shared.duckdb", DbBudget("64MB", 1)
    writer = connect(path, budget, row_group_size=2048)
    writer.execute("CREATE TABLE t AS SELECT 1 AS i")
    threading.Timer(0.5, writer.close).start()
    reader = connect_retrying(path, budget, timeout_s=20, what="the run store")
    try:
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (1,)
    finally:
        reader.close()
