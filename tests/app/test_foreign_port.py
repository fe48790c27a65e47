"""The app with its embedded Weaviate's ports held by another process's Weaviate (another data directory): the sidebar
says whose the port is, and the Corpus page's Ingest writes into the app's own server on another port, never into
that one. A real foreign server (tests/helpers/server_helper.py), a real one of the app's, AppTest."""

from __future__ import annotations

import os
import time

import pytest

from ..helpers.app import assert_clean, open_app, texts
from ..helpers.server_helper import foreign_weaviate

pytestmark = pytest.mark.slow


@pytest.fixture
def foreign(tmp_path):
    with foreign_weaviate(tmp_path / "someone-else") as server:
        yield server


def two_entry_corpus(root):
    (root / "net").mkdir(parents=True)
    (root / "net" / "DnsDown.md").write_text("---\ntitle: DNS resolution fails\n---\nCheck the CoreDNS pods.\n")
    (root / "net" / "PacketLoss.md").write_text("---\ntitle: Packet loss between zones\n---\nLoss over 2 percent.\n")
    return root


def test_the_app_never_offers_to_write_into_a_foreign_weaviate(monkeypatch, tmp_path, foreign):
    for name in [n for n in os.environ if n.startswith("LOOKUP_")]:
        monkeypatch.delenv(name)
    env = {
        "LOOKUP_CONFIG": str(tmp_path / "no-lookup.yaml"),
        "LOOKUP_DATA_DIR": str(tmp_path / "mine"),
        "LOOKUP_CORPUS_DIR": str(two_entry_corpus(tmp_path / "kb")),
        "LOOKUP_COLLECTION": "TestForeignPort",
        "LOOKUP_WEAVIATE_PORT": str(foreign.port),
        "LOOKUP_WEAVIATE_GRPC_PORT": str(foreign.grpc_port),
        "LOOKUP_L1_TIMEOUT_S": "60",  # a cold start of the app's own server on a busy machine
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    whose = f"127.0.0.1:{foreign.port} is held by another Weaviate (data directory {foreign.weaviate_dir}, pid {foreign.pid})"
    started = time.monotonic()
    at = open_app("Lookup")
    first_page_s = time.monotonic() - started
    said = texts(at.sidebar.warning)
    assert any(whose in s and "this app uses port" in s for s in said), said
    at.switch_page("pages/corpus.py").run()  # needs L1: waits for the app's own server (stopped by fresh_caches)
    at.run()  # the sidebar, drawn before the page waited, now says where L1 is connected
    assert_clean(at)
    sidebar = " ".join(texts(at.sidebar.markdown))
    assert f"127.0.0.1:{foreign.port}" not in sidebar, sidebar
    assert "L1 connected" in sidebar, sidebar
    at.button(key="corpus_ingest").click().run()
    assert_clean(at)
    assert any("Indexed" in s and "TestForeignPort" in s for s in texts(at.success)), texts(at.error)
    assert foreign.collections() == {"Orphan"}, "the app wrote into the other process's Weaviate"
    print(f"\nfirst page with the port held by another Weaviate: {first_page_s:.1f} s")
