"""The invocation store: every lookup_knowledge call as a `tool_invocation` row in a DuckDB file.

DuckDB lets one process at a time hold the file (a writer blocks readers too). So nobody keeps it open:
1. `record()` appends the row as one JSON line to this process's spool file and flushes it to the OS
   before the answer is returned (a kill -9 of the process cannot lose it).
2. `flush()` (on a background thread, and on demand) claims every finished spool file in the folder,
   its own and those of other or dead processes, opens the database for a moment with retry on the
   lock, and inserts the rows that are not in it yet (by id), a chunk of lines at a time, each chunk in one
   transaction, so memory stays flat whatever the spool holds and a replay adds nothing twice.

Typed copies of what the dashboard reads often are written beside the JSON in the same transaction: the
per-stage timings as columns of tool_invocation, and one row per matched L0 keyword (invocation_keyword)
and per returned result (invocation_result). Unnesting the JSON of 1M rows took 20-80 s per dashboard
query; the typed tables answer in well under 200 ms (see retrieval.bench.runner).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import duckdb
import orjson
import pandas as pd
import pyarrow as pa

from retrieval.config import db_budget
from retrieval.core.record import InvocationRecord
from retrieval.errors import StoreError
from retrieval.records.db_budget import DbBudget, connect_retrying, duckdb_frames

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_invocation (
    id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    tool_name VARCHAR NOT NULL,
    input VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    layer VARCHAR NOT NULL,
    latency_ms DOUBLE NOT NULL,
    result JSON USING COMPRESSION zstd,
    retrieval_details JSON USING COMPRESSION zstd,
    error VARCHAR,
    session_tag VARCHAR NOT NULL,
    domain VARCHAR,
    l1_status VARCHAR,
    fallback BOOLEAN,
    top_entry_id VARCHAR
);
"""
COLUMNS = (
    "id",
    "created_at",
    "tool_name",
    "input",
    "status",
    "layer",
    "latency_ms",
    "result",
    "retrieval_details",
    "error",
    "session_tag",
    "domain",
    "l1_status",
    "fallback",
    "top_entry_id",
)
STAGES = ("l0", "embed", "l1", "fuse")  # the per-stage timings lookup_knowledge keeps in retrieval_details
STAGE_COLUMNS = tuple(f"{s}_ms" for s in STAGES)  # ... and typed copies of them in tool_invocation
CHILD_SCHEMA = """
CREATE TABLE IF NOT EXISTS invocation_keyword (
    invocation_id VARCHAR NOT NULL,
    term VARCHAR NOT NULL,
    field VARCHAR,
    weight DOUBLE
);
CREATE TABLE IF NOT EXISTS invocation_result (
    invocation_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    entry_id VARCHAR NOT NULL,
    domain VARCHAR,
    source VARCHAR,
    score DOUBLE
);
"""
_KEYWORD_TYPE = '[{"term": "VARCHAR", "field": "VARCHAR", "weight": "DOUBLE"}]'
_RESULT_TYPE = '[{"entry_id": "VARCHAR", "domain": "VARCHAR", "source": "VARCHAR", "score": "DOUBLE"}]'


# The JSON columns are compressed with zstd: DuckDB's default for long strings (dictionary + FSST) took 15-80 s
# to checkpoint 20k rows (12 KB of JSON each), zstd 1-5 s, in a smaller file. (A file written before keeps its own.)
SPOOL_SCHEMA = pa.schema(
    [
        *((c, pa.string()) for c in ("id", "created_at", "tool_name", "input", "status", "layer")),
        ("latency_ms", pa.float64()),
        *((c, pa.string()) for c in ("result", "retrieval_details", "error", "session_tag", "domain", "l1_status")),
        ("fallback", pa.bool_()),
        ("top_entry_id", pa.string()),
    ]
)
CHUNK_BYTES = (1 << 20, 32 << 20)  # an insert chunk's input: 1/32 of the memory budget, within these bounds


def chunk_bytes(budget: DbBudget) -> int:
    """The input bytes of one insert chunk: memory stays flat whatever the spool or table holds."""
    return max(CHUNK_BYTES[0], min(CHUNK_BYTES[1], budget.memory_bytes // 32))


def _stage_exprs(details: str) -> list[str]:
    return [f"TRY_CAST(json_extract_string({details}, '$.timings_ms.{s}') AS DOUBLE)" for s in STAGES]


def _derive_children(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Insert the keyword and result rows of every invocation in `source` (a table or view with id,
    retrieval_details and result, JSON or JSON text)."""
    con.execute(
        "INSERT INTO invocation_keyword SELECT id, k.term, k.field, k.weight FROM ("
        f"SELECT id, unnest(from_json(json_extract(retrieval_details, '$.l0.matched_keywords'), '{_KEYWORD_TYPE}')) AS k "
        f"FROM {source}) WHERE k.term IS NOT NULL"
    )
    con.execute(
        "INSERT INTO invocation_result SELECT id, r.rank, r.item.entry_id, r.item.domain, r.item.source, r.item.score "
        "FROM (SELECT id, unnest(list_transform(from_json(json_extract(result, '$.results'), "
        f"'{_RESULT_TYPE}'), lambda x, i: {{'rank': i, 'item': x}})) AS r FROM {source}) WHERE r.item.entry_id IS NOT NULL"
    )


@contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All or nothing: COMMIT when the block ends, ROLLBACK if it raises (or the process is interrupted)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables; bring a file written before the typed tables up to date (backfilled from the JSON)."""
    with _transaction(con):
        con.execute(SCHEMA)
        have = {
            r[0]
            for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'tool_invocation' AND schema_name = 'main'"
            ).fetchall()
        }
        missing = [c for c in STAGE_COLUMNS if c not in have]
        for column in missing:
            con.execute(f"ALTER TABLE tool_invocation ADD COLUMN {column} DOUBLE")
        if missing:
            sets = ", ".join(f"{c} = {e}" for c, e in zip(STAGE_COLUMNS, _stage_exprs("retrieval_details"), strict=True))
            con.execute(f"UPDATE tool_invocation SET {sets}")
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        con.execute(CHILD_SCHEMA)
        if not {"invocation_keyword", "invocation_result"} <= tables:
            con.execute("DELETE FROM invocation_keyword")
            con.execute("DELETE FROM invocation_result")
            _derive_children(con, "tool_invocation")


def insert_rows(con: duckdb.DuckDBPyConnection, rows: pa.Table, *, max_bytes: int = CHUNK_BYTES[1]) -> int:
    """Insert the rows (COLUMNS, JSON columns as text) whose id is not stored yet, with their typed stage
    columns and child rows, a chunk of at most `max_bytes` at a time, each chunk in one transaction (a replay
    adds nothing twice, so a chunk that fails leaves nothing half-done). Returns the rows added."""
    added, start = 0, 0
    per_row = max(1, rows.nbytes // max(1, rows.num_rows))
    step = max(1, max_bytes // per_row)
    while start < rows.num_rows:
        added += _insert_chunk(con, rows.slice(start, step))
        start += step
    return added


def _insert_chunk(con: duckdb.DuckDBPyConnection, chunk: pa.Table) -> int:
    # INSERT OR IGNORE skips ids already stored (or repeated in the chunk) through the primary key's index;
    # the timings are read from retrieval_details with one parse of it, not one per stage.
    paths = ", ".join(f"'$.timings_ms.{s}'" for s in STAGES)
    stage_values = [f"TRY_CAST(timings[{i}] AS DOUBLE)" for i in range(1, len(STAGES) + 1)]
    con.register("incoming_chunk", chunk)
    try:
        with _transaction(con):
            inserted = con.execute(
                f"INSERT OR IGNORE INTO tool_invocation ({', '.join(COLUMNS + STAGE_COLUMNS)}) "
                f"SELECT {', '.join(COLUMNS[:1])}, CAST(created_at AS TIMESTAMPTZ), {', '.join(COLUMNS[2:])}, "
                f"{', '.join(stage_values)} FROM (SELECT *, json_extract_string(retrieval_details, [{paths}]) AS timings "
                "FROM incoming_chunk) RETURNING id"
            ).fetchall()
            if len(inserted) == chunk.num_rows:
                _derive_children(con, "incoming_chunk")
            elif inserted:
                con.register("inserted_ids", pa.table({"id": [r[0] for r in inserted]}))
                _derive_children(
                    con,
                    "(SELECT * FROM incoming_chunk WHERE id IN (SELECT id FROM inserted_ids) "
                    "QUALIFY row_number() OVER (PARTITION BY id) = 1)",
                )
                con.unregister("inserted_ids")
    finally:
        con.unregister("incoming_chunk")
    return len(inserted)


def spool_table(lines: list[bytes]) -> tuple[pa.Table, int]:
    """Spool lines as an Arrow table of SPOOL_SCHEMA (JSON columns as text), and how many lines were cut short."""
    columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    bad = 0
    for line in lines:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:  # text orjson refuses (invalid UTF-8, escaped lone surrogates): json, then replacement characters
                plain = json.dumps(json.loads(line.decode("utf-8", "replace")), ensure_ascii=False)
                row = json.loads(plain.encode("utf-8", "replace"))
            except json.JSONDecodeError:
                bad += 1  # a line cut short by a crash mid-write: its answer was never returned
                continue
        for c in COLUMNS:
            columns[c].append(row.get(c))
    for c in ("result", "retrieval_details"):
        columns[c] = [None if v is None else orjson.dumps(v, default=str).decode() for v in columns[c]]
    return pa.Table.from_pydict(columns, schema=SPOOL_SCHEMA), bad


def spool_line(rec: InvocationRecord) -> bytes:
    """The record as one line of UTF-8 JSON. orjson takes a tenth of the time json.dumps took on the
    request path; text it refuses (lone surrogates) goes through json with replacement characters."""
    try:
        return orjson.dumps(rec.to_dict(), default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(rec.to_dict(), ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")


def routing_of(details: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """(every domain L0 hinted, the L1 filter applied or None) of a row's retrieval_details. Rows recorded
    before `domains` and `filter` were written (whose `domain` column held the first hinted domain even when
    L1 ran unfiltered) are read from their `l0` and `l1` parts."""
    if "domains" in details:
        return tuple(details["domains"]), details.get("filter")
    l1 = details.get("l1") or {}
    applied = (l1.get("filter") or {}).get("category") if l1.get("status") in ("ok", "empty", "failed") else None
    return tuple((details.get("l0") or {}).get("domains") or ()), applied


# Shared by every InvocationStore of this process (there may be several on one file, e.g. one per
# app session): one flush at a time per spool folder, and the spool files still being appended to.
_PROCESS_LOCK = threading.Lock()
_FLUSH_LOCKS: dict[Path, threading.Lock] = {}
_ACTIVE_SPOOLS: set[tuple[Path, str]] = set()  # (resolved spool folder, file name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed process that its parent has not reaped yet (a zombie) still answers kill(pid, 0),
    # but it will never write its spool again: count it as dead so its rows are adopted now.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux) or it just went away: the next flush looks again
    return stat.rsplit(")", 1)[-1].split()[:1] not in (["Z"], ["X"])


class InvocationStore:
    """Records invocations without holding the DuckDB file; reads with short-lived connections."""

    def __init__(self, db_path: Path | str, *, lock_timeout_s: float = 30.0, budget: DbBudget | None = None) -> None:
        self.db_path = Path(db_path)
        self.budget = db_budget() if budget is None else budget  # None: LOOKUP_DB_MEMORY_LIMIT / LOOKUP_DB_THREADS
        self.spool_dir = self.db_path.with_name(self.db_path.name + ".spool")
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.RLock()  # one DuckDB connection at a time in this process
        self._held = threading.local()  # the connection reading() holds for this thread
        self._spool_lock = threading.Lock()
        self._spool_file: IO[bytes] | None = None
        self._spool_path: Path | None = None
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        self._spool_key = self.spool_dir.resolve()
        with _PROCESS_LOCK:  # one flush at a time per spool folder in this process (claim, insert, unlink)
            self._flush_lock = _FLUSH_LOCKS.setdefault(self._spool_key, threading.Lock())
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
        line = spool_line(rec)
        with self._spool_lock:
            if self._spool_file is None:
                path = self.spool_dir / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                with _PROCESS_LOCK:
                    _ACTIVE_SPOOLS.add((self._spool_key, path.name))
                self._spool_path = path
                self._spool_file = open(path, "ab")  # noqa: SIM115 - stays open across records; _rotate closes it
            self._spool_file.write(line)
            self._spool_file.flush()

    def _rotate(self) -> None:
        with self._spool_lock:
            if self._spool_file is not None and self._spool_path is not None:
                self._spool_file.close()
                self._spool_path.rename(self._spool_path.with_suffix(".ready"))
                with _PROCESS_LOCK:
                    _ACTIVE_SPOOLS.discard((self._spool_key, self._spool_path.name))
                self._spool_file = self._spool_path = None

    def _claim(self) -> list[Path]:
        """Take every finished spool file, and the open ones of processes that died."""
        claimed = []
        me = os.getpid()
        for path in sorted(self.spool_dir.iterdir()):
            pid_text = path.name.split("-", 1)[0]
            if path.suffix == ".claimed" and pid_text == str(me):
                claimed.append(path)  # ours, left by a flush that could not reach the database
                continue
            if path.suffix == ".jsonl" and pid_text == str(me):
                # Left by an earlier process that had our PID (PIDs are reused, e.g. PID 1 in a
                # container). Checked under the process lock, so a file that a store of this process
                # is appending to is never taken.
                with _PROCESS_LOCK:
                    if (self._spool_key, path.name) in _ACTIVE_SPOOLS:
                        continue
                    target = self._claim_one(path, me)
            elif path.suffix == ".ready" or (
                path.suffix in (".jsonl", ".claimed") and pid_text.isdigit() and not _pid_alive(int(pid_text))
            ):
                target = self._claim_one(path, me)
            else:
                continue
            if target is not None:
                claimed.append(target)
        return claimed

    def _claim_one(self, path: Path, me: int) -> Path | None:
        target = self.spool_dir / f"{me}-{uuid.uuid4().hex[:8]}.claimed"
        try:
            path.rename(target)
        except FileNotFoundError:
            return None  # another process claimed it first
        return target

    def pending(self) -> int:
        """Rows waiting in spool files (all processes)."""
        n = 0
        for path in self.spool_dir.glob("*"):
            try:
                with open(path, "rb") as fh:
                    n += sum(1 for _ in fh)
            except FileNotFoundError:
                continue
        return n

    def flush(self, timeout_s: float | None = None) -> int:
        """Move every spooled row into the database. Returns the rows read from spool."""
        # Serialised per process: two threads flushing at once (the background flusher and query(),
        # or two stores on one file) would both take this process's .claimed files, insert them
        # twice and unlink them under each other (FileNotFoundError, which killed the flusher).
        if getattr(self._held, "con", None) is not None:
            return 0  # this thread reads inside reading(): a write would wait for its own connection
        with self._flush_lock:
            return self._flush(timeout_s)

    def _flush(self, timeout_s: float | None) -> int:
        self._rotate()
        files = self._claim()
        if not files:
            return 0
        read = 0

        def insert(con: duckdb.DuckDBPyConnection) -> None:
            nonlocal read
            read = 0
            for lines in self._spooled_chunks(files, chunk_bytes(self.budget)):
                table, bad = spool_table(lines)
                read += len(lines) - bad
                if table.num_rows:
                    insert_rows(con, table)

        self.with_connection(insert, read_only=False, timeout_s=timeout_s)
        for path in files:
            path.unlink(missing_ok=True)
        return read

    @staticmethod
    def _spooled_chunks(files: list[Path], max_bytes: int) -> Iterator[list[bytes]]:
        """The lines of the spool files, in lists of about `max_bytes`: memory does not grow with the spool."""
        lines: list[bytes] = []
        size = 0
        for path in files:
            with open(path, "rb") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    lines.append(line)
                    size += len(line)
                    if size >= max_bytes:
                        yield lines
                        lines, size = [], 0
        if lines:
            yield lines

    def start_background_flush(self, interval_s: float = 1.0) -> None:
        if self._flusher is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval_s):
                with contextlib.suppress(Exception):  # rows stay in the spool; the next round tries again
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
