"""app_support.resources: the context's store is made once per connection, not on every access."""

from __future__ import annotations

import time

from app_support.resources import AppContext, Connection, Opening
from retrieval.core.hints import L0Index


def test_the_store_is_built_once_per_connection_and_collection(base_settings, weaviate_client, sample_corpus):
    settings = base_settings.with_(collection="TestSample")
    conn = Connection(weaviate_client, None, "test", time.monotonic())
    l0 = L0Index(sample_corpus.entries)
    ctx = AppContext(settings, sample_corpus, l0, Opening.of(conn), None, None)
    store = ctx.store
    assert store is not None and store.name == "TestSample"
    assert ctx.store is store and ctx.lookup_services(record=False).store is store
    store.fold_factor = 4  # what a search taught it
    rerun = AppContext(settings, sample_corpus, l0, Opening.of(conn), None, None)  # the next run of the page
    assert rerun.store is store and rerun.store.fold_factor == 4
    other = AppContext(settings.with_(collection="TestOther"), sample_corpus, l0, Opening.of(conn), None, None)
    assert other.store is not None and other.store is not store and other.store.name == "TestOther"
    reconnected = Connection(weaviate_client, None, "test", conn.opened_at + 1.0)
    assert AppContext(settings, sample_corpus, l0, Opening.of(reconnected), None, None).store is not store
    down = Opening.of(Connection(None, "down", "test", time.monotonic()))
    offline = AppContext(settings, sample_corpus, l0, down, None, None)
    assert offline.store is None


def test_an_opening_answers_at_once_and_gives_the_connection_when_it_is_made(base_settings, tmp_path):
    """A server that accepts and never answers (a real socket): the opening is still going when asked, a wait
    with a limit comes back empty, and the connection's failure arrives as its error, not as an exception."""
    import socket

    from app_support.resources import _open

    silent, silent_grpc = socket.socket(), socket.socket()
    for sock in (silent, silent_grpc):
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
    try:
        port, grpc_port = silent.getsockname()[1], silent_grpc.getsockname()[1]
        settings = base_settings.with_(weaviate_url=f"http://127.0.0.1:{port}", remote_grpc_port=grpc_port, l1_timeout_s=2.0)
        t0 = time.monotonic()
        opening = Opening.start(settings)
        assert time.monotonic() - t0 < 1.0  # the thread connects; the caller goes on
        assert opening.peek() is None and opening.wait(0.2) is None
        assert opening.target == f"remote Weaviate at http://127.0.0.1:{port}"
        conn = opening.wait(120)
        assert conn is not None and not conn.ok and conn.error and str(port) in conn.error
        assert opening.peek() is conn
    finally:
        silent.close()
        silent_grpc.close()
    # the same as connecting on the caller's thread: the one function both run
    dead = _open(base_settings.with_(weaviate_url="http://127.0.0.1:9", remote_grpc_port=9))
    assert not dead.ok and "127.0.0.1:9" in (dead.error or "")
