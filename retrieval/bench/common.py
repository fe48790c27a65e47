"""What the benches share: percentiles, the machine's description, and writing a result's .md and .json."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.engine.ownership import holders_of, listening_inodes


def paired_l1(
    store: Any, vectors: Sequence[Any], categories: Sequence[str], *, k: int
) -> tuple[list[float], list[float], list[set[str]], list[set[str]]]:
    """Each query vector searched unfiltered and filtered on `categories[i % len(categories)]` (near_vector, k
    entries), the order of the two alternating query by query: the ms of each unfiltered and filtered search, and
    the entry ids each found, in query order."""
    from retrieval.core.search_request import SearchRequest
    from retrieval.types.modes import SearchMode

    ms: tuple[list[float], list[float]] = ([], [])
    found: tuple[list[set[str]], list[set[str]]] = ([], [])
    for i, vec in enumerate(vectors):
        pair = ((0, None), (1, categories[i % len(categories)]))
        for side, category in pair if i % 2 == 0 else pair[::-1]:
            t0 = time.perf_counter()
            hits = store.search(SearchRequest(SearchMode.NEAR_VECTOR, k, vec, category=category))
            ms[side].append((time.perf_counter() - t0) * 1000)
            found[side].append({h.entry_id for h in hits})
    return ms[0], ms[1], found[0], found[1]


def pct(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def machine_info(client) -> dict[str, Any]:
    from importlib.metadata import version

    import duckdb
    import weaviate

    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem, 1),
        "onnxruntime": version("onnxruntime"),
        "tokenizers": version("tokenizers"),
        "duckdb": duckdb.__version__,
        "weaviate_client": weaviate.__version__,
        "weaviate_server": client.get_meta().get("version"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


def write_results(result: dict[str, Any], out_dir: Path, name: str, log: Callable[[str], None]) -> dict[str, Any]:
    """Write `result["table"]` to `<time>-<name>.md` and the rest to `.json` in `out_dir`; add their paths as "files"."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{datetime.now(UTC).strftime('%Y-%m-%d-%H%M%S')}-{name}"
    stem.with_suffix(".md").write_text(result["table"] + "\n", encoding="utf-8")
    stem.with_suffix(".json").write_text(
        json.dumps({k: v for k, v in result.items() if k != "table"}, indent=2) + "\n", encoding="utf-8"
    )
    result["files"] = [str(stem.with_suffix(".md")), str(stem.with_suffix(".json"))]
    log(f"wrote {result['files'][0]} and .json in {result['elapsed_s']} s")
    return result


def dir_mb(path: Path | None) -> float | None:
    """The bytes of the files under `path` in MB (None: no such folder here, e.g. a server given by URL). A file that
    goes while it is counted (a server merging its segments) is left out."""
    if path is None or not path.is_dir():
        return None
    total = 0
    for f in path.rglob("*"):
        with contextlib.suppress(OSError):
            if f.is_file():
                total += f.stat().st_size
    return round(total / 2**20, 1)


def listening_pid(port: int) -> int | None:
    """The pid of the local process listening on TCP `port` (Linux /proc), or None: the RSS of a Weaviate
    given by URL, when it runs on this machine."""
    inodes = listening_inodes(port)
    holders = holders_of(inodes) if inodes else ()
    return holders[0].pid if holders else None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds process `pid` has used (Linux /proc), or None when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14 and 15)


QUIET_BELOW = 0.1  # of a core: the server's CPU share under which it counts as quiet
QUIET_WINDOW_S = 5.0


def wait_for_quiet(
    pid: int | None,
    *,
    below: float = QUIET_BELOW,
    window_s: float = QUIET_WINDOW_S,
    max_s: float = 180.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait until process `pid` uses under `below` of a core over `window_s`, or `max_s` has passed: after an ingest Weaviate
    compacts its index on the cores a timed query needs. Returns the wait, the last window's CPU share and whether it
    ended quiet (None: no process to watch)."""
    if pid is None or cpu_seconds(pid) is None:
        return {"waited_s": 0.0, "cpu_share": None, "quiet": None}
    t0 = time.monotonic()
    share = None
    while True:
        c0, w0 = cpu_seconds(pid), time.monotonic()
        sleep(window_s)
        c1, w1 = cpu_seconds(pid), time.monotonic()
        if c0 is None or c1 is None:  # the process went away
            return {"waited_s": round(w1 - t0, 1), "cpu_share": share, "quiet": None}
        share = round((c1 - c0) / max(w1 - w0, 1e-6), 3)
        if share < below or w1 - t0 >= max_s:
            return {"waited_s": round(w1 - t0, 1), "cpu_share": share, "quiet": share < below}
