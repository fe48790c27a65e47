"""The rows of every table of a DuckDB file, read while another process (the app) may hold it for a moment."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb

from retrieval.records.db_budget import is_lock_error


def table_rows(db_path: Path, *, wait_s: float = 120.0) -> dict[str, int]:
    """{table: row count} of every table in the file ({} when there is no file yet). Opens it read-only and
    retries while the app holds its lock (it does so for a moment per write)."""
    if not Path(db_path).exists():
        return {}
    deadline = time.monotonic() + wait_s
    while True:
        try:
            con = duckdb.connect(str(db_path), read_only=True)
        except duckdb.Error as exc:
            if is_lock_error(exc) and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise
        try:
            names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
            return {name: int(con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]) for name in names}
        finally:
            con.close()


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    """The tables whose row count differs (a table missing on one side counts 0 rows)."""
    return {t: (before.get(t, 0), after.get(t, 0)) for t in sorted({*before, *after}) if before.get(t, 0) != after.get(t, 0)}
