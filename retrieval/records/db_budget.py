"""Every DuckDB connection the project opens, within a memory budget.

DuckDB's own defaults are a memory limit of 80% of the machine and a thread per core: one insert of a
million invocation rows took 18 GB, beside Weaviate and the app. `connect()` opens every file (the invocation
store, its SQL console, the lab's run store, the bench) with `memory_limit`, `threads` and a temp directory
next to the file for what spills (LOOKUP_DB_MEMORY_LIMIT, LOOKUP_DB_THREADS).
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from retrieval.errors import ConfigError, StoreError

DEFAULT_MEMORY_LIMIT = "1GB"
DEFAULT_THREADS = 2
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_UNITS["tib"] = 2**40
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)
MIN_MEMORY_BYTES = 16 * 10**6  # below this DuckDB cannot hold the few blocks a query needs


def parse_size(text: str, *, name: str = "LOOKUP_DB_MEMORY_LIMIT") -> int:
    """Bytes of a size such as 1GB, 256MB, 1.5GiB (decimal units as DuckDB reads them); ConfigError naming `name`."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ConfigError(f"{name}: {text!r} is not a size such as 1GB, 512MB or 2GiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < MIN_MEMORY_BYTES:
        raise ConfigError(f"{name}: {text!r} is below the smallest budget DuckDB can work in (16MB)")
    return size


@dataclass(frozen=True)
class DbBudget:
    """The memory limit (DuckDB's syntax, e.g. 1GB) and threads of every connection to one file."""

    memory_limit: str = DEFAULT_MEMORY_LIMIT
    threads: int = DEFAULT_THREADS

    def __post_init__(self) -> None:
        parse_size(self.memory_limit)
        if int(self.threads) < 1:
            raise ConfigError(f"LOOKUP_DB_THREADS: {self.threads!r} must be at least 1")

    @property
    def memory_bytes(self) -> int:
        return parse_size(self.memory_limit)

    def config(self, db_path: Path | str, *, spill: bool = True) -> dict[str, Any]:
        """The connect() options: the budget, and spilling to `<file>.tmp` beside the database (or, without
        `spill`, no spilling at all: a query over the budget fails instead of filling the disk)."""
        where = {"temp_directory": str(temp_directory(db_path))} if spill else {"max_temp_directory_size": "0B"}
        return {"memory_limit": self.memory_limit, "threads": int(self.threads), **where}

    def with_memory_limit(self, memory_limit: str) -> DbBudget:
        """This budget with a smaller memory limit (the SQL console's); never a larger one."""
        return self if parse_size(memory_limit) >= self.memory_bytes else DbBudget(memory_limit, self.threads)


def temp_directory(db_path: Path | str) -> Path:
    """Where DuckDB spills what does not fit the budget: `<file>.tmp`, on the same disk as the file."""
    path = Path(db_path)
    return path.with_name(path.name + ".tmp")


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
