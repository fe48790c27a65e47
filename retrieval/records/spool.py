"""The spool: each process appends its invocation rows as JSON lines to its own file, flushed to the OS before the answer
is returned (a kill -9 cannot lose one); a flusher claims finished files by renaming them, so no row is read twice.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa

from retrieval.core.record import InvocationRecord
from retrieval.records.parts import row_parts
from retrieval.records.schema import COLUMNS, PART_COLUMNS, SPOOL_SCHEMA

# Shared by every Spool of this process (there may be several stores on one file, e.g. one per app session):
# one flush at a time per spool folder, and the spool files still being appended to.
_PROCESS_LOCK = threading.Lock()
_FLUSH_LOCKS: dict[Path, threading.Lock] = {}
_ACTIVE_SPOOLS: set[tuple[Path, str]] = set()  # (resolved spool folder, file name)


def spool_line(rec: InvocationRecord) -> bytes:
    """The record as one line of UTF-8 JSON. orjson takes a tenth of the time json.dumps took on the
    request path; text it refuses (lone surrogates) goes through json with replacement characters."""
    try:
        return orjson.dumps(rec.to_dict(), default=str, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(rec.to_dict(), ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")


def spool_table(lines: list[bytes]) -> tuple[pa.Table, int]:
    """Spool lines as an Arrow table of SPOOL_SCHEMA (JSON columns as text, with their typed parts), and how many
    lines were cut short. Each line's parsed JSON is let go as soon as its columns are taken: only text is held."""
    columns: dict[str, list[Any]] = {c: [] for c in (*COLUMNS, *PART_COLUMNS)}
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
        for c, value in row_parts(row.get("result"), row.get("retrieval_details")).items():
            columns[c].append(value)
        for c in COLUMNS:
            value = row.get(c)
            if c in ("result", "retrieval_details") and value is not None:
                value = orjson.dumps(value, default=str).decode()
            columns[c].append(value)
    return pa.Table.from_pydict(columns, schema=SPOOL_SCHEMA), bad


def spooled_chunks(files: list[Path], max_bytes: int, rows_multiple: int = 1) -> Iterator[list[bytes]]:
    """The lines of the spool files, in lists of about `max_bytes` (memory does not grow with the spool), each a
    multiple of `rows_multiple` lines where that many fit (the store's row group: see retrieval.records.insert)."""
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
                    cut = len(lines) // rows_multiple * rows_multiple or len(lines)
                    yield lines[:cut]
                    lines = lines[cut:]
                    size = sum(map(len, lines))
    if lines:
        yield lines


def pid_alive(pid: int) -> bool:
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


class Spool:
    """One store's spool folder (`<db file>.spool`): this process's open file, and the claiming of finished ones."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._key = folder.resolve()
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        with _PROCESS_LOCK:  # one flush at a time per spool folder in this process (claim, insert, unlink)
            self.flush_lock = _FLUSH_LOCKS.setdefault(self._key, threading.Lock())

    def append(self, line: bytes) -> None:
        """Append one line to this process's file and hand it to the OS (durable against a process kill)."""
        with self._lock:
            if self._file is None:
                path = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                with _PROCESS_LOCK:
                    _ACTIVE_SPOOLS.add((self._key, path.name))
                self._path = path
                self._file = open(path, "ab")  # noqa: SIM115 - stays open across records; rotate closes it
            self._file.write(line)
            self._file.flush()

    def rotate(self) -> None:
        """Close this store's open file and mark it finished (`.ready`), so a flush may claim it."""
        with self._lock:
            if self._file is not None and self._path is not None:
                self._file.close()
                self._path.rename(self._path.with_suffix(".ready"))
                with _PROCESS_LOCK:
                    _ACTIVE_SPOOLS.discard((self._key, self._path.name))
                self._file = self._path = None

    def claim(self) -> list[Path]:
        """Take every finished spool file, and the open ones of processes that died."""
        claimed = []
        me = os.getpid()
        for path in sorted(self.folder.iterdir()):
            pid_text = path.name.split("-", 1)[0]
            if path.suffix == ".claimed" and pid_text == str(me):
                claimed.append(path)  # ours, left by a flush that could not reach the database
                continue
            if path.suffix == ".jsonl" and pid_text == str(me):
                # Left by an earlier process that had our PID (PIDs are reused, e.g. PID 1 in a
                # container). Checked under the process lock, so a file that a store of this process
                # is appending to is never taken.
                with _PROCESS_LOCK:
                    if (self._key, path.name) in _ACTIVE_SPOOLS:
                        continue
                    target = self._claim_one(path, me)
            elif path.suffix == ".ready" or (
                path.suffix in (".jsonl", ".claimed") and pid_text.isdigit() and not pid_alive(int(pid_text))
            ):
                target = self._claim_one(path, me)
            else:
                continue
            if target is not None:
                claimed.append(target)
        return claimed

    def _claim_one(self, path: Path, me: int) -> Path | None:
        target = self.folder / f"{me}-{uuid.uuid4().hex[:8]}.claimed"
        try:
            path.rename(target)
        except FileNotFoundError:
            return None  # another process claimed it first
        return target

    def pending(self) -> int:
        """Rows waiting in spool files (all processes)."""
        n = 0
        for path in self.folder.glob("*"):
            try:
                with open(path, "rb") as fh:
                    n += sum(1 for _ in fh)
            except FileNotFoundError:
                continue
        return n


def spool_dir_of(db_path: Path) -> Path:
    """The spool folder of a DuckDB file: `<file>.spool` beside it."""
    return db_path.with_name(db_path.name + ".spool")


class SpoolRecorder:
    """Records into a DuckDB file's spool without opening the file, for a short-lived process (a CLI lookup) that should not
    wait for DuckDB's one writer. Rows are durable once `record` returns; the next store that flushes moves them in."""

    def __init__(self, db_path: Path | str, *, finish_each: bool = False) -> None:
        self.spool = Spool(spool_dir_of(Path(db_path)))
        self.finish_each = finish_each  # a long-lived process (the standing keeper): each record ready for a flush at once

    def record(self, rec: InvocationRecord) -> None:
        self.spool.append(spool_line(rec))
        if self.finish_each:
            self.spool.rotate()

    def close(self) -> None:
        """Mark this process's spool file finished, so the next flush takes it at once."""
        self.spool.rotate()
