"""Read-only mode: whether this app may write (ingest, re-index, reload the corpus). LOOKUP_READ_ONLY decides
when set; unset, the app is read-only when it listens beyond this machine (server.address not loopback, or unset)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def binds_loopback(address: str | None) -> bool:
    """True when `address` (Streamlit's server.address) reaches this machine only."""
    if address is None or not address.strip():
        return False  # Streamlit then listens on every interface
    host = address.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name or an interface address: reachable from the network


@dataclass(frozen=True)
class WriteAccess:
    read_only: bool
    reason: str  # why, for the sidebar


def write_access(read_only: bool | None, address: str | None) -> WriteAccess:
    """The setting when it is given; otherwise read-only unless the app binds a loopback address."""
    if read_only is True:
        return WriteAccess(True, "LOOKUP_READ_ONLY is true")
    if read_only is False:
        return WriteAccess(False, "LOOKUP_READ_ONLY is false")
    if address is not None and binds_loopback(address):
        return WriteAccess(False, f"the app listens on {address.strip()} (this machine only)")
    where = f"on {address.strip()}" if address and address.strip() else "on every network interface (server.address is not set)"
    return WriteAccess(True, f"the app listens {where}, beyond this machine; LOOKUP_READ_ONLY=false allows writes")


def server_address() -> str | None:
    """Streamlit's server.address option (from .streamlit/config.toml, --server.address or the environment)."""
    from streamlit import config

    value = config.get_option("server.address")
    return None if value is None else str(value)
