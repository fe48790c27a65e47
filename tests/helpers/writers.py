"""Every writer of one invocation store at once, as real processes (tests/records/test_every_writer.py): a schedule that
keeps each writer calling until all have made their share, the loops of CLI lookups, MCP SDK clients and a `sql`
reader, and what the store holds afterwards."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.bench.load import Tally, lookup_call
from retrieval.records.spool import spool_dir_of
from retrieval.serve.warm_client import KEEPER_ANSWERED

from .cli import cli, standing_env
from .mcp_process import http_client, stored_rows

# What no process may say: DuckDB's lock refused (its messages), a store it could not open, or any stack trace.
TROUBLE = (
    "could not set lock",
    "conflicting lock",
    "unique file handle conflict",
    "cannot open the invocation store",
    "traceback",
)


class Schedule:
    """Each writer makes at least its share of calls and keeps calling until every writer has made its own, so that all
    of them write at the same time. None runs ahead: a writer's next call waits until every other is within `lead`
    times its pace (calls over share). `go` starts them together."""

    def __init__(self, shares: dict[str, int], *, lead: float = 4.0) -> None:
        self.shares, self.lead = shares, lead
        self.go = threading.Event()
        self.sent: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.failures: list[str] = []
        self._done: set[str] = set()
        self._turn = threading.Condition()

    def next_call(self, writer: str) -> int | None:
        """The number of `writer`'s next call (from 0) once it is its turn, or None when it is to stop."""
        with self._turn:
            while True:
                mine = self.sent[writer]
                if mine >= self.shares[writer] and self._all_made():
                    self._turn.notify_all()
                    return None
                if self._in_step(writer, mine):
                    self.sent[writer] += 1
                    self._turn.notify_all()
                    return mine
                self._turn.wait()

    def _in_step(self, writer: str, mine: int) -> bool:
        pace = mine / self.shares[writer] / self.lead
        return all(self.sent[w] >= int(pace * n) for w, n in self.shares.items() if w != writer and w not in self._done)

    def _all_made(self) -> bool:
        return all(self.sent[w] >= n or w in self._done for w, n in self.shares.items())

    def answered_one(self, writer: str) -> None:
        with self._turn:
            self.answered[writer] += 1

    def failed(self, writer: str, what: str) -> None:
        with self._turn:
            self.failures.append(f"{writer}: {what}")

    def give_up(self, writer: str, why: str) -> None:
        """`writer` cannot go on (its loop raised): the others do not wait for it."""
        self.failed(writer, why)
        with self._turn:
            self._done.add(writer)
            self._turn.notify_all()


def described(exc: BaseException) -> str:
    """An exception as `Type: message`, an exception group as its leaves' (where the cause is)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(described(leaf) for leaf in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def writer_thread(schedule: Schedule, writer: str, loop: Callable[[], None]) -> threading.Thread:
    """A started thread that waits for `go`, then runs `loop`; whatever it raises is a failure of `writer`."""

    def run() -> None:
        schedule.go.wait()
        try:
            loop()
        except BaseException as exc:  # reported as the writer's failure, which the test asserts on
            schedule.give_up(writer, described(exc))

    thread = threading.Thread(target=run, name=f"writer-{writer}", daemon=True)
    thread.start()
    return thread


def cli_lookups(schedule: Schedule, writer: str, queries: list[str], env: dict[str, str]) -> None:
    """`python -m retrieval lookup --session WRITER` calls, each of which the standing server's keeper must answer."""
    while (i := schedule.next_call(writer)) is not None:
        done = cli("lookup", queries[i % len(queries)], "--session", writer, "--json", "-v", env=env)
        if done.returncode != 0:
            schedule.failed(writer, f"exit {done.returncode}: {done.stderr[-1500:]}")
            continue
        schedule.answered_one(writer)  # recorded whoever answered it
        said = [line for line in done.stderr.splitlines() if line.strip()]
        if said != [KEEPER_ANSWERED]:
            schedule.failed(writer, f"not (only) the keeper's answer: {said[-5:]}")


def mcp_clients(schedule: Schedule, writer: str, url: str, queries: list[str], clients: int) -> None:
    """`clients` MCP SDK clients named `writer` (the server's session tag) calling lookup_knowledge on `url`."""

    async def one() -> None:
        tally = Tally()
        async with http_client(url, writer) as client:
            while (i := await asyncio.to_thread(schedule.next_call, writer)) is not None:
                if await lookup_call(client, queries[i % len(queries)], None, tally):
                    schedule.answered_one(writer)
                else:
                    schedule.failed(writer, f"call {i}: {dict(tally.errors)}")

    async def every() -> None:
        await asyncio.gather(*(one() for _ in range(clients)))

    asyncio.run(every())


@dataclass
class SqlReader:
    """`python -m retrieval sql` counting the rows, over and over until `stop`: its counts and its failures."""

    env: dict[str, str]
    stop: threading.Event = field(default_factory=threading.Event)
    counts: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def loop(self) -> None:
        while not self.stop.is_set():
            done = cli("sql", "SELECT count(*) AS n FROM tool_invocation", "--json", env=self.env)
            if done.returncode != 0 or done.stderr.strip():
                self.failures.append(f"exit {done.returncode}: {done.stderr[-1500:]}")
                continue
            self.counts.append(int(json.loads(done.stdout)["n"]))

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.loop, name="sql-reader", daemon=True)
        thread.start()
        return thread


def spooled_files(db_path: Path) -> dict[str, int]:
    """{file name: lines} of every file in the store's spool folder: what still waits to be moved in."""
    folder = spool_dir_of(db_path)
    if not folder.is_dir():
        return {}
    return {p.name: len([x for x in p.read_bytes().splitlines() if x.strip()]) for p in sorted(folder.iterdir())}


@dataclass(frozen=True)
class Stored:
    """What tool_invocation holds: rows per session tag, and the ids that occur more than once."""

    per_tag: dict[str, int]
    rows: int
    repeated_ids: tuple[str, ...]


def stored(db_path: Path) -> Stored:
    rows = stored_rows(db_path)
    ids = Counter(r["id"] for r in rows)
    return Stored(dict(Counter(r["session_tag"] for r in rows)), len(rows), tuple(i for i, n in ids.items() if n > 1))


def trouble_in(text: str) -> list[str]:
    """The lines of a process's output that report a refused DuckDB lock or a stack trace."""
    return [line for line in text.splitlines() if any(t in line.lower() for t in TROUBLE)]


def lookup_env(tmp: Path, corpus: Path, collection: str) -> dict[str, str]:
    """The LOOKUP_ settings every writer shares: a standing server's of its own (one data directory, embedded Weaviate
    and collection), one DuckDB file, and no settings file."""
    return standing_env(tmp, corpus, collection) | {
        "LOOKUP_CONFIG": str(tmp / "no-lookup.yaml"),
        "LOOKUP_DB_PATH": str(tmp / "invocations.duckdb"),
    }
