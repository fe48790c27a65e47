"""The invocation store: every lookup_knowledge call as a `tool_invocation` row in a DuckDB file.

DuckDB lets one process at a time hold the file (a writer blocks readers too). So nobody keeps it open:
1. `record()` appends the row as one JSON line to this process's spool file and flushes it to the OS
   before the answer is returned (a kill -9 of the process cannot lose it).
2. `flush()` (on a background thread, and on demand) claims every finished spool file in the folder,
   its own and those of other or dead processes, opens the database for a moment with retry on the
   lock, and inserts the rows that are not in it yet (by id, in one transaction), so a replay adds nothing twice.

Typed copies of what the dashboard reads often are written beside the JSON in the same transaction: the
per-stage timings as columns of tool_invocation, and one row per matched L0 keyword (invocation_keyword)
and per returned result (invocation_result). Unnesting the JSON of 1M rows took 20-80 s per dashboard
query; the typed tables answer in well under 200 ms (see retrieval.bench).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import duckdb
import orjson
import pandas as pd

from .errors import StoreError

T = TypeVar("T")
TOOL_NAME = "lookup_knowledge"

SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_invocation (
    id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    tool_name VARCHAR NOT NULL,
    input VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    layer VARCHAR NOT NULL,
    latency_ms DOUBLE NOT NULL,
    result JSON,
    retrieval_details JSON,
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


def insert_rows(con: duckdb.DuckDBPyConnection, source: str) -> int:
    """Insert the rows of `source` (COLUMNS, JSON columns as JSON or text) whose id is not stored yet,
    with their typed stage columns and child rows, in one transaction. Returns the rows added."""
    with _transaction(con):
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE fresh_invocation AS SELECT {', '.join(COLUMNS)} FROM {source} s "
            "WHERE NOT EXISTS (SELECT 1 FROM tool_invocation t WHERE t.id = s.id) "
            "QUALIFY row_number() OVER (PARTITION BY s.id ORDER BY s.created_at) = 1"
        )
        counted = con.execute("SELECT count(*) FROM fresh_invocation").fetchone()
        added = counted[0] if counted else 0
        con.execute(
            f"INSERT INTO tool_invocation ({', '.join(COLUMNS + STAGE_COLUMNS)}) "
            f"SELECT {', '.join(COLUMNS + tuple(_stage_exprs('retrieval_details')))} FROM fresh_invocation"
        )
        _derive_children(con, "fresh_invocation")
        con.execute("DROP TABLE fresh_invocation")
    return int(added)


@dataclass(frozen=True)
class InvocationRecord:
    """One row of tool_invocation. `result` and `retrieval_details` are JSON-ready dicts."""

    id: str
    created_at: str  # ISO 8601, UTC
    tool_name: str
    input: str
    status: str
    layer: str
    latency_ms: float
    result: dict[str, Any]
    retrieval_details: dict[str, Any]
    error: str | None
    session_tag: str
    domain: str | None
    l1_status: str | None
    fallback: bool
    top_entry_id: str | None

    def to_dict(self) -> dict[str, Any]:
        # Shallow: dataclasses.asdict deep-copied result and retrieval_details on every record(), which
        # was most of what recording cost.
        return {f.name: getattr(self, f.name) for f in fields(self)}


def spool_line(rec: InvocationRecord) -> bytes:
    """The record as one line of UTF-8 JSON. orjson takes a tenth of the time json.dumps took on the
    request path; text it refuses (lone surrogates) goes through json with replacement characters."""
    try:
        return orjson.dumps(rec.to_dict(), default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(rec.to_dict(), ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")


def new_invocation_id() -> str:
    return uuid.uuid4().hex


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat()


def is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text or "different configuration" in text


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

    def __init__(self, db_path: Path | str, *, lock_timeout_s: float = 30.0) -> None:
        self.db_path = Path(db_path)
        self.spool_dir = self.db_path.with_name(self.db_path.name + ".spool")
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.RLock()  # one DuckDB connection at a time in this process
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
    ) -> T:
        """Open, run `fn`, close; retry while another process holds the file."""
        deadline = time.monotonic() + (self.lock_timeout_s if timeout_s is None else timeout_s)
        delay = 0.02
        with self._lock:
            while True:
                try:
                    if read_only and not self.db_path.exists():
                        raise StoreError(f"{self.db_path}: the invocation store does not exist yet")
                    con = duckdb.connect(str(self.db_path), read_only=read_only, config=config or {})
                except duckdb.Error as exc:
                    if is_lock_error(exc) and time.monotonic() < deadline:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.5)
                        continue
                    raise StoreError(f"{self.db_path}: cannot open the invocation store: {exc}") from exc
                try:
                    return fn(con)
                finally:
                    con.close()

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
        with self._flush_lock:
            return self._flush(timeout_s)

    def _flush(self, timeout_s: float | None) -> int:
        self._rotate()
        files = self._claim()
        if not files:
            return 0
        rows, bad = [], 0
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        bad += 1  # a line cut short by a crash mid-write: its answer was never returned
        if rows:
            frame = pd.DataFrame(rows, columns=list(COLUMNS))
            for col in ("result", "retrieval_details"):
                frame[col] = frame[col].map(lambda v: json.dumps(v, ensure_ascii=False, default=str))
            frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True, format="ISO8601")

            def insert(con: duckdb.DuckDBPyConnection) -> None:
                con.register("incoming", frame)
                insert_rows(con, "incoming")

            self.with_connection(insert, read_only=False, timeout_s=timeout_s)
        for path in files:
            path.unlink(missing_ok=True)
        return len(rows)

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
