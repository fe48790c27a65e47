"""Every DuckDB connection the project opens, within a memory budget: `connect()` sets `memory_limit`, `threads`
(LOOKUP_DB_MEMORY_LIMIT, LOOKUP_DB_THREADS) and a temp directory beside the file, as DuckDB's defaults take 80% of the
machine and a thread per core.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from retrieval.errors import StoreError
from retrieval.types.budget import DbBudget


def connect(
    db_path: Path | str,
    budget: DbBudget,
    *,
    read_only: bool = False,
    spill: bool = True,
    config: dict[str, Any] | None = None,
    row_group_size: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """duckdb.connect with the budget; `config` adds options. With `row_group_size` the file is attached with that
    row group size (DuckDB takes it only on ATTACH, for the row groups this connection writes), under the name a
    plain connect gives it, and used as the default catalog."""
    options = {**budget.config(db_path, spill=spill), **(config or {})}
    if row_group_size is None:
        return duckdb.connect(str(db_path), read_only=read_only, config=options)
    con = duckdb.connect(":memory:", config=options)
    try:
        name = Path(db_path).stem.replace('"', '""')
        mode = ", READ_ONLY" if read_only else ""
        con.execute(f'ATTACH ? AS "{name}" (ROW_GROUP_SIZE {int(row_group_size)}{mode})', [str(db_path)])
        con.execute(f'USE "{name}"')
    except BaseException:
        con.close()
        raise
    return con


def is_lock_error(exc: BaseException) -> bool:
    """Another process holds the file (DuckDB's one-writer-process lock), or this process opened it with other
    options, or attached it to another connection (a store writer, see connect's row_group_size)."""
    text = str(exc)
    return any(
        sign in text
        for sign in ("Could not set lock", "Conflicting lock", "different configuration", "Unique file handle conflict")
    )


def connect_retrying(
    db_path: Path | str, budget: DbBudget, *, timeout_s: float, what: str, **options: Any
) -> duckdb.DuckDBPyConnection:
    """`connect`, tried again with back-off while another process holds the file, for up to `timeout_s`; then,
    or on any other error, StoreError naming the file and `what` it is (e.g. "the invocation store")."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        try:
            return connect(db_path, budget, **options)
        except duckdb.Error as exc:
            if is_lock_error(exc) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            raise StoreError(f"{db_path}: cannot open {what}: {exc}") from exc


def is_memory_error(exc: BaseException) -> bool:
    """DuckDB gave up on a query for want of memory within its limit (its Out of Memory Error)."""
    return isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory" in str(exc)


@contextmanager
def duckdb_frames() -> Iterator[None]:
    """Around duckdb's DataFrame conversion (.df(), fetch_df_chunk): it calls DataFrame.drop(inplace=True), which
    pandas 3.1 deprecates (Pandas4Warning), once per call. The warning is about duckdb's code; it filled the app
    log and the sql command's output. (A filter set once at import is undone by libraries that reset them.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The inplace keyword in DataFrame\.drop", category=DeprecationWarning)
        yield
