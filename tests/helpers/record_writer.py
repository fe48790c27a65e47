"""A separate process that uses InvocationStore for real, for the multi-process and crash tests.

    python record_writer.py DB_PATH SESSION_TAG COUNT [--mode MODE] [options]

Every id is printed on its own line ("ID <id>") right after record() returned, and stdout is flushed,
so a test that kills this process knows exactly which rows it was promised. Modes:
  write      wait for a line on stdin (a start signal), record COUNT rows with the background flusher
             running, close() the store (final flush), print "DONE".
  crash      record COUNT rows, print "RECORDED", then sleep without flushing until killed.
  flushloop  record rows in batches of --batch and flush() after each batch; prints "IN-DB" once the
             flush holds its DuckDB connection (just before the INSERT) and "INSERTED" after it; sleeps
             after COUNT rows. Meant to be killed while inside a flush.
  hold-lock  open DB_PATH read-write with duckdb.connect, print "LOCKED", hold it --hold-s seconds (or, with
             --stop-file, until that file exists, at most 60 s), close, print "RELEASED".
  read       only read: InvocationStore.query(count) in a loop (no flush) until --stop-file exists;
             prints "READ <n>" per query and "READS <k> ERRORS <e>" at the end (exit 1 on any error).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from retrieval.core.record import TOOL_NAME, InvocationRecord, new_invocation_id, utc_now_iso
from retrieval.errors import StoreError
from retrieval.records.invocations import InvocationStore


def make_record(session_tag: str, i: int) -> InvocationRecord:
    return InvocationRecord(
        id=new_invocation_id(),
        created_at=utc_now_iso(),
        tool_name=TOOL_NAME,
        input=f"writer {session_tag} query {i}: disk full on /var — what now?",
        status="ok",
        layer="L0+L1" if i % 2 else "L0",
        latency_ms=float(i % 97) + 0.5,
        result={"results": [{"entry_id": f"e{i % 7}", "score": 0.5 + (i % 5) / 10}]},
        retrieval_details={
            "l0": {"domains": ["storage", "linux"], "matches": [{"entry_id": f"e{i % 7}", "score": 1.0}]},
            "l1": {"status": "ok", "filter": {"domain": "storage"}},
            "seq": i,
        },
        error=None,
        session_tag=session_tag,
        domain="storage",
        l1_status="ok",
        fallback=bool(i % 3 == 0),
        top_entry_id=f"e{i % 7}",
    )


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class MarkedStore(InvocationStore):
    """Tells the test when a flush holds the database, so it can kill the process right there."""

    in_flush = False

    def with_connection(self, fn, **kw):  # type: ignore[override]
        if not self.in_flush:
            return super().with_connection(fn, **kw)

        def marked(con):
            say("IN-DB")
            out = fn(con)
            say("INSERTED")
            return out

        return super().with_connection(marked, **kw)

    def flush(self, timeout_s=None):  # type: ignore[override]
        self.in_flush = True
        try:
            return super().flush(timeout_s)
        finally:
            self.in_flush = False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("db_path")
    ap.add_argument("session_tag")
    ap.add_argument("count", type=int)
    ap.add_argument("--mode", default="write", choices=["write", "crash", "flushloop", "hold-lock", "read"])
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--interval", type=float, default=0.05, help="background flush interval (write mode)")
    ap.add_argument("--hold-s", type=float, default=2.0)
    ap.add_argument("--stop-file", default=None)
    ap.add_argument("--pace-s", type=float, default=0.0, help="sleep between records (write mode)")
    args = ap.parse_args()

    if args.mode == "hold-lock":
        import duckdb

        con = duckdb.connect(args.db_path)
        con.execute("SELECT count(*) FROM tool_invocation").fetchall()
        say("LOCKED")
        if args.stop_file:
            deadline = time.monotonic() + 60
            while not Path(args.stop_file).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        else:
            time.sleep(args.hold_s)
        con.close()
        say("RELEASED")
        return 0

    if args.mode == "read":
        store = InvocationStore(args.db_path)
        say("READY")
        reads = errors = 0
        deadline = time.monotonic() + 60
        stop = Path(args.stop_file)
        while not stop.exists() and time.monotonic() < deadline:
            try:
                n = int(store.query("SELECT count(*) AS n FROM tool_invocation", flush_first=False)["n"][0])
                say(f"READ {n}")
                reads += 1
            except StoreError as exc:
                errors += 1
                say(f"ERROR {exc}")
            time.sleep(0.01)
        say(f"READS {reads} ERRORS {errors}")
        return 1 if errors else 0

    store = MarkedStore(args.db_path) if args.mode == "flushloop" else InvocationStore(args.db_path)
    if args.mode == "write":
        say("READY")
        sys.stdin.readline()  # the start signal: both writers begin together
        store.start_background_flush(interval_s=args.interval)
    for i in range(args.count):
        rec = make_record(args.session_tag, i)
        store.record(rec)
        say(f"ID {rec.id}")
        if args.mode == "flushloop" and (i + 1) % args.batch == 0:
            store.flush()
        if args.pace_s:
            time.sleep(args.pace_s)
    if args.mode == "write":
        store.close()
        say("DONE")
        return 0
    say("RECORDED")
    while True:  # crash / flushloop: wait to be killed, never flushing again
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
