"""Free local TCP ports for the servers this project starts (tests, benches, clusters)."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

from retrieval.errors import WeaviateSetupError

# Ports are drawn below the kernel's range for outgoing connections, so a connection opened between the draw
# and the server's bind (or while a node is down) cannot take the port.
LOWEST = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_given: set[int] = set()  # handed out by this process already: two servers never get the same one
_lock = threading.Lock()
_draw = random.Random()


def port_free(port: int) -> bool:
    """Nothing listens on `port` (connections left in TIME_WAIT do not count: the servers bind with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def drawing_range(ephemeral_low: int | None) -> range | None:
    """Where ports are drawn: from LOWEST up to the ephemeral range; None when there is too little room."""
    if ephemeral_low is None or ephemeral_low - LOWEST < 1000:
        return None
    return range(LOWEST, ephemeral_low - 1)  # the last one leaves room for a pair's neighbour


def ephemeral_low() -> int | None:
    """The lowest port the kernel gives outgoing connections, or None where it does not say."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _candidate(span: range | None) -> int:
    if span is not None:
        return _draw.choice(span)
    with socket.socket() as s:  # no known range: let the OS pick
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port(*, pair: bool = False) -> int:
    """A port nothing listens on and this process has not handed out; with `pair`, its +1 neighbour is free too."""
    span = drawing_range(ephemeral_low())
    with _lock:
        for _ in range(1000):
            port = _candidate(span)
            wanted = (port, port + 1) if pair else (port,)
            if not _given.intersection(wanted) and all(port_free(p) for p in wanted):
                _given.update(wanted)
                return port
    raise WeaviateSetupError("no free TCP port (or port pair) on 127.0.0.1")
