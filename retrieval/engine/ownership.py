"""Whose server listens on the embedded ports: ours (a Weaviate whose data directory is the settings'), none, or
another one. `judge` decides from what was seen and is pure; `look` sees it through /proc (the edge)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from retrieval.engine.parent_death import process_env

DATA_PATH_ENV = "PERSISTENCE_DATA_PATH"  # where an embedded Weaviate keeps its data, from its environment


@dataclass(frozen=True)
class Holder:
    """A process that listens on a port: its pid, program name and, for a Weaviate, its data directory."""

    pid: int
    program: str
    data_dir: str | None = None

    def describe(self) -> str:
        if self.data_dir is not None or self.program.startswith("weaviate"):
            return f"another Weaviate (data directory {self.data_dir or 'unknown'}, pid {self.pid})"
        return f"{self.program or 'a process'} (pid {self.pid}), not a Weaviate of this project"


@dataclass(frozen=True)
class PortSeen:
    """One port as seen: whether something listens, and the processes found holding it (none: not visible)."""

    port: int
    listening: bool
    holders: tuple[Holder, ...] = ()


class Owner(StrEnum):
    FREE = "free"  # nothing listens on either port: ours to start
    OURS = "ours"  # our data directory's server answers on both
    STARTING = "starting"  # our data directory's server holds one port only (still coming up)
    FOREIGN = "foreign"  # something else holds a port: never used, never written to


@dataclass(frozen=True)
class Verdict:
    owner: Owner
    why: str = ""  # for FOREIGN: whose the port is, e.g. "127.0.0.1:8079 is held by another Weaviate (...)"


def _ours(seen: PortSeen, data_dir: str) -> bool:
    return any(h.data_dir is not None and os.path.realpath(h.data_dir) == data_dir for h in seen.holders)


def judge(data_dir: str, http: PortSeen, grpc: PortSeen) -> Verdict:
    """Whose the ports are, for a server of `data_dir` (a resolved path): only a server of that data directory is ours."""
    listening = [p for p in (http, grpc) if p.listening]
    if not listening:
        return Verdict(Owner.FREE)
    other = next((p for p in listening if not _ours(p, data_dir)), None)
    if other is None:
        return Verdict(Owner.OURS if len(listening) == 2 else Owner.STARTING)
    whose = other.holders[0].describe() if other.holders else "a process this user cannot inspect"
    return Verdict(Owner.FOREIGN, f"127.0.0.1:{other.port} is held by {whose}")


# --- the edge: what /proc says ------------------------------------------------------------------------------
LISTEN = "0A"


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def listening_inodes(port: int) -> set[int]:
    """The socket inodes listening on TCP `port` (any address), from /proc/net/tcp and tcp6."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(cols[9]))
    return found


def holders_of(inodes: set[int]) -> tuple[Holder, ...]:
    """The processes (of those this user may inspect) with one of these sockets open."""
    wanted = {f"socket:[{i}]" for i in inodes}
    found: list[Holder] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not wanted:
            continue
        try:
            fds = list((proc / "fd").iterdir())
            argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if _links(fds) & wanted:
            pid = int(proc.name)
            found.append(Holder(pid, os.path.basename(argv0), process_env(pid, DATA_PATH_ENV)))
    return tuple(sorted(found, key=lambda h: h.pid))


def _links(fds: list[Path]) -> set[str]:
    """What these descriptors point at (one closed meanwhile, as the listing's own, is left out)."""
    found = set()
    for fd in fds:
        try:
            found.add(os.readlink(fd))
        except OSError:
            continue
    return found


def see(port: int, listening: bool) -> PortSeen:
    inodes = listening_inodes(port) if listening else set()
    return PortSeen(port, listening, holders_of(inodes) if inodes else ())


def look(data_dir: Path, port: int, grpc_port: int) -> Verdict:
    """Whose `port` and `grpc_port` on 127.0.0.1 are now, for a server of `data_dir`."""
    http, grpc = see(port, port_open("127.0.0.1", port)), see(grpc_port, port_open("127.0.0.1", grpc_port))
    return judge(os.path.realpath(data_dir), http, grpc)
