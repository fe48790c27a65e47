"""The DuckDB memory budget of every connection (LOOKUP_DB_MEMORY_LIMIT, LOOKUP_DB_THREADS), parsed and checked
without DuckDB: retrieval.records.db_budget opens the connections with it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError

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
