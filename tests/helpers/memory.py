"""This process's resident memory from /proc/self/status, and a reset of its peak (Linux)."""

from __future__ import annotations

from pathlib import Path


def status_kb(field: str) -> int:
    """VmRSS, VmHWM, ... of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> int:
    """Set VmHWM back to the current RSS (writing 5 to clear_refs); returns that RSS in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return status_kb("VmRSS")
