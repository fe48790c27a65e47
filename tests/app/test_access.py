"""Read-only mode of the app: the setting, else the address Streamlit binds (app_support/access.py)."""

from __future__ import annotations

import pytest

from app_support.access import binds_loopback, write_access


@pytest.mark.parametrize(
    "address, loopback",
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        (" LOCALHOST ", True),
        (None, False),
        ("", False),
        ("  ", False),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("10.0.0.5", False),
        ("demo.example.org", False),
        ("fe80::1", False),
    ],
)
def test_binds_loopback(address, loopback):
    assert binds_loopback(address) is loopback


@pytest.mark.parametrize(
    "setting, address, read_only, says",
    [
        (None, "127.0.0.1", False, "127.0.0.1"),
        (None, "localhost", False, "this machine only"),
        (None, "0.0.0.0", True, "0.0.0.0"),
        (None, None, True, "every network interface"),
        (None, "", True, "server.address is not set"),
        (True, "127.0.0.1", True, "LOOKUP_READ_ONLY is true"),
        (True, None, True, "LOOKUP_READ_ONLY is true"),
        (False, "0.0.0.0", False, "LOOKUP_READ_ONLY is false"),  # said explicitly: writes allowed beyond loopback
        (False, None, False, "LOOKUP_READ_ONLY is false"),
    ],
)
def test_write_access(setting, address, read_only, says):
    access = write_access(setting, address)
    assert access.read_only is read_only
    assert says in access.reason
