"""The invocation store: every lookup_knowledge call as a `tool_invocation` row in a DuckDB file, which nobody keeps open
(a DuckDB writer blocks readers too): `record()` appends a line to this process's spool, and `flush()` claims finished
spools (its own, other or dead processes') and inserts the rows not stored yet (docs/operations.md).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from retrieval.config import db_budget
from retrieval.core.record import InvocationRecord
from retrieval.errors import StoreError
from retrieval.records.db_budget import connect_retrying, duckdb_frames
from retrieval.records.insert import chunk_bytes, insert_rows
from retrieval.records.schema import COLUMNS, ROW_GROUP_ROWS, SCHEMA, STAGE_COLUMNS, STAGES, ensure_schema
from retrieval.records.spool import Spool, spool_dir_of, spool_line, spool_table, spooled_chunks
from retrieval.types.budget import DbBudget

if TYPE_CHECKING:  # query() hands over duckdb's own frame: a lookup that only records never loads pandas
    import pandas as pd

__all__ = [
    "COLUMNS",
    "SCHEMA",
    "STAGES",
    "STAGE_COLUMNS",
    "InvocationStore",
    "chunk_bytes",
    "ensure_schema",
    "insert_rows",
    "routing_of",
    "spool_line",
    "spool_table",
]

T = TypeVar("T")


def routing_of(details: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """(every domain L0 hinted, the L1 filter applied or None) of a row's retrieval_details. Rows recorded
    before `domains` and `filter` were written (whose `domain` column held the first hinted domain even when
    L1 ran unfiltered) are read from their `l0` and `l1` parts."""
    if "domains" in details:
        return tuple(details["domains"]), details.get("filter")
    l1 = details.get("l1") or {}
    applied = (l1.get("filter") or {}).get("category") if l1.get("status") in ("ok", "empty", "failed") else None
    return tuple((details.get("l0") or {}).get("domains") or ()), applied


class InvocationStore:
    """Records invocations without holding the DuckDB file; reads with short-lived connections."""

    def __init__(self, db_path: Path | str, *, lock_timeout_s: float = 30.0, budget: DbBudget | None = None) -> None:
        self.db_path = Path(db_path)
        self.budget = db_budget() if budget is None else budget  # None: LOOKUP_DB_MEMORY_LIMIT / LOOKUP_DB_THREADS
        self.spool_dir = spool_dir_of(self.db_path)
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.RLock()  # one DuckDB connection at a time in this process
        self._held = threading.local()  # the connection reading() holds for this thread
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.spool = Spool(self.spool_dir)
        self.with_connection(ensure_schema, read_only=False)

    # --- connections ------------------------------------------------------------------------------
    def with_connection(
        self,
        fn: Callable[[duckdb.DuckDBPyConnection], T],
        *,
        read_only: bool,
        config: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        budget: DbBudget | None = None,
        spill: bool = True,
    ) -> T:
        """Open (within the store's memory budget, or a smaller `budget`), run `fn`, close; retry while another
        process holds the file. Without `spill`, a query over the budget fails instead of spilling to disk.
        Inside `reading()`, a plain read-only call runs on the connection it holds."""
        with self._lock:
            held = getattr(self._held, "con", None)
            if held is not None and read_only and config is None and budget is None and spill:
                return fn(held)
            con = self._open(read_only=read_only, config=config, timeout_s=timeout_s, budget=budget, spill=spill)
            try:
                return fn(con)
            finally:
                con.close()

    def _open(
        self, *, read_only: bool, config: dict[str, Any] | None, timeout_s: float | None, budget: DbBudget | None, spill: bool
    ) -> duckdb.DuckDBPyConnection:
        if read_only and not self.db_path.exists():
            raise StoreError(f"{self.db_path}: the invocation store does not exist yet")
        return connect_retrying(
            self.db_path,
            budget or self.budget,
            timeout_s=self.lock_timeout_s if timeout_s is None else timeout_s,
            what="the invocation store",
            read_only=read_only,
            spill=spill,
            config=config,
            row_group_size=None if read_only else ROW_GROUP_ROWS,
        )

    @contextmanager
    def reading(self, timeout_s: float | None = None) -> Iterator[None]:
        """Every read-only call of this thread in the block over one connection, opened once (after a flush):
        a page's several queries pay one open (30-60 ms each), and hold the file only while the block runs."""
        if getattr(self._held, "con", None) is not None:
            yield
            return
        with contextlib.suppress(StoreError):  # rows still in the spool show on a later read
            self.flush(timeout_s=2.0)
        with self._lock:
            try:
                self._held.con = self._open(read_only=True, config=None, timeout_s=timeout_s, budget=None, spill=True)
            except StoreError:  # each call in the block opens its own, and reports the error where it is shown
                yield
                return
            try:
                yield
            finally:
                self._held.con.close()
                self._held.con = None

    # --- writing ----------------------------------------------------------------------------------
    def record(self, rec: InvocationRecord) -> None:
        """Append the row to this process's spool; durable against a process kill once this returns."""
        self.spool.append(spool_line(rec))

    def pending(self) -> int:
        """Rows waiting in spool files (all processes)."""
        return self.spool.pending()

    def flush(self, timeout_s: float | None = None) -> int:
        """Move every spooled row into the database. Returns the rows read from spool."""
        # Serialised per process: two threads flushing at once (the background flusher and query(),
        # or two stores on one file) would both take this process's .claimed files, insert them
        # twice and unlink them under each other (FileNotFoundError, which killed the flusher).
        if getattr(self._held, "con", None) is not None:
            return 0  # this thread reads inside reading(): a write would wait for its own connection
        with self.spool.flush_lock:
            return self._flush(timeout_s)

    def _flush(self, timeout_s: float | None) -> int:
        self.spool.rotate()
        files = self.spool.claim()
        if not files:
            return 0
        read = 0

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            nonlocal read
            read = 0
            max_bytes = chunk_bytes(self.budget)
            for lines in spooled_chunks(files, max_bytes, ROW_GROUP_ROWS):
                table, bad = spool_table(lines)
                read += len(lines) - bad
                if table.num_rows:
                    insert_rows(con, table, max_bytes=max_bytes)

        self.with_connection(insert, read_only=False, timeout_s=timeout_s)
        for path in files:
            path.unlink(missing_ok=True)
        return read

    def start_background_flush(self, interval_s: float = 1.0) -> None:
        if self._flusher is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval_s):
                with contextlib.suppress(Exception):  # rows stay in the spool; the next flush tries again
                    self.flush(timeout_s=interval_s)

        self._flusher = threading.Thread(target=loop, name="invocation-flusher", daemon=True)
        self._flusher.start()

    def close(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)
            self._flusher = None
        with contextlib.suppress(StoreError):  # still safe in the spool
            self.flush()

    # --- reading ----------------------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | None = None, *, flush_first: bool = True) -> pd.DataFrame:
        """A trusted query from the app's own code (not the SQL console: see sql_console)."""
        if flush_first:
            with contextlib.suppress(StoreError):  # rows still in the spool show on a later read
                self.flush(timeout_s=2.0)
        with duckdb_frames():
            return self.with_connection(lambda con: con.execute(sql, params or []).df(), read_only=False)

    def get(self, invocation_id: str) -> dict[str, Any] | None:
        """The recorded row (the InvocationRecord fields) with its JSON parsed, or None."""
        frame = self.query(f"SELECT {', '.join(COLUMNS)} FROM tool_invocation WHERE id = ?", [invocation_id])
        if frame.empty:
            return None
        row = {str(k): v for k, v in frame.iloc[0].items()}
        for col in ("result", "retrieval_details"):
            row[col] = json.loads(row[col]) if isinstance(row[col], str) else row[col]
        return row

    def count(self, session_tag: str | None = None) -> int:
        if session_tag is None:
            return int(self.query("SELECT count(*) AS n FROM tool_invocation")["n"][0])
        return int(self.query("SELECT count(*) AS n FROM tool_invocation WHERE session_tag = ?", [session_tag])["n"][0])
