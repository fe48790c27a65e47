"""Reads the invocation store the way the app does, in its own process, for tests/test_faults.py.

    python fault_reader.py DB_PATH STOP_FILE

Like app_support's cached invocation_store: one InvocationStore with the background flusher running,
and InvocationStore.query (which flushes first) for every figure shown, in a loop until STOP_FILE
exists. Prints "READY", then "READS <k> ERRORS <e> MAX <largest count seen>" (exit 1 on any error,
each printed as "ERROR <message>"). A count that ever goes down is an error too.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from retrieval.errors import LookupLabError
from retrieval.records.invocations import InvocationStore


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main() -> int:
    db_path, stop = Path(sys.argv[1]), Path(sys.argv[2])
    store = InvocationStore(db_path)
    store.start_background_flush()
    say("READY")
    reads = errors = seen = 0
    deadline = time.monotonic() + 300
    while not stop.exists() and time.monotonic() < deadline:
        try:
            n = int(store.query("SELECT count(*) AS n FROM tool_invocation")["n"][0])
            store.query("SELECT layer, count(*) AS calls FROM tool_invocation GROUP BY layer")
            if n < seen:
                errors += 1
                say(f"ERROR the row count went down from {seen} to {n}")
            seen = max(seen, n)
            reads += 1
        except LookupLabError as exc:
            errors += 1
            say(f"ERROR {exc}")
        time.sleep(0.05)
    store.close()
    say(f"READS {reads} ERRORS {errors} MAX {seen}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
