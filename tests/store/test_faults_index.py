"""An index lost for real: kill -9 of an embedded Weaviate right after an ingest, then the restart the app's
connection check does. While the restarted server loads its shards a lookup is L1 unavailable with that reason
(never L1 'empty'); once loaded the index reads as needing repair, N of M entries missing; the repair brings
every lookup back to L0+L1. Nothing is mocked: the server, the model and the collection are real.
Run with `pytest -s` to see the figures."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from retrieval.core.corpus import Corpus
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.engine.server import connect, port_open
from retrieval.store import indexing
from retrieval.store.corpus_status import corpus_health, read_index
from retrieval.store.factory import knowledge_store
from retrieval.store.index_health import unsearchable_chunks

from ..conftest import free_port
from ..helpers.processes import alive, stop_servers, wait_until

DOMAINS = ("security", "databases")


def kill_9(client) -> None:
    process = client._connection.embedded_db.process  # the Popen of weaviate-client's embedded mode
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not alive(process.pid)


def truncate_commit_logs(data_dir: Path) -> int:
    """What a kill -9 does to the HNSW commit log Weaviate had not written out: cut every log to half."""
    logs = [p for p in data_dir.rglob("*") if p.is_file() and p.parent.name.endswith(".hnsw.commitlog.d")]
    for path in logs:
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    return len(logs)


@pytest.mark.slow
def test_kill_9_loses_the_index_loading_then_repair(base_settings, tmp_path, sample_corpus, embedder):
    settings = base_settings.with_(
        data_dir=tmp_path / "data", embedded_port=free_port(), embedded_grpc_port=free_port(), collection="Lost", l1_timeout_s=5.0
    )
    part = Corpus("part", tuple(e for e in sample_corpus.entries if e.domain in DOMAINS))
    client = connect(settings)
    try:
        store = knowledge_store(client, settings)
        indexing.ingest(store, part, embedder)
        services = LookupServices(L0Index(sample_corpus.entries), embedder, store)
        kill_9(client)  # at once: the HNSW commit log is still in the server's buffer

        # The app's connection check (is_live) starts the server again on the same data directory; it answers
        # as soon as its ports listen, seconds before its shards are loaded.
        client.is_live()
        port, grpc_port = settings.embedded_port, settings.embedded_grpc_port
        wait_until(lambda: port_open("127.0.0.1", port) and port_open("127.0.0.1", grpc_port), 60, "the server listens")
        during, readings = [], []
        while not client.is_ready():
            readings.append(read_index(store))
            during.append(lookup_knowledge(part.entries[0].title, services, settings.options()))
        assert during, "the restarted server was ready before the first lookup: no loading window seen"
        loading = [r for r in during if "loading the index" in (r.l1.error or "")]
        assert loading, [(r.l1.status, r.l1.error) for r in during]
        for r in loading:
            assert (r.l1.status, r.layer, r.fallback) == ("unavailable", "L0", True) and r.results
        assert all(r.l1.status != "empty" for r in during)
        assert any(corpus_health(part, r).state == "loading" for r in readings)
        print(
            f"\nrestart after kill -9: {len(during)} lookups before the server was ready, {len(loading)} of them "
            f"L1 unavailable '{loading[0].l1.error}'"
        )

        lost = unsearchable_chunks(store)
        how = "kill -9"
        if not lost:  # the server had written its commit log out in time: lose its tail for real, as kill -9 does
            kill_9(client)
            logs = truncate_commit_logs(settings.weaviate_data_dir)
            assert logs
            client.is_live()
            how = f"kill -9, then {logs} HNSW commit log(s) cut to half while it was down"
            lost = {}
        wait_until(client.is_ready, 120, "the restarted server is ready")
        lost = lost or unsearchable_chunks(store)
        assert lost, "the vector index lost nothing"
        health = corpus_health(part, read_index(store))
        assert (health.state, health.missing, health.entries) == ("needs_repair", len(lost), len(part.entries))
        assert f"{len(lost)} of {len(part.entries)} entries are missing" in health.message
        assert store.count_chunks() == sum(n for _, n, _ in store.indexed_state().values())  # the objects survived
        print(f"after {how}: {health.message} ({sum(lost.values())} of {store.count_chunks()} chunks unsearchable)")

        report = indexing.ingest(store, part, embedder)  # what Repair runs
        assert report.repaired_index and report.updated >= len(lost) and report.added == 0
        assert unsearchable_chunks(store) == {}
        assert corpus_health(part, read_index(store)).state == "current"
        back = [lookup_knowledge(e.title, services, settings.options()) for e in part.entries]
        found = sum(e.entry_id in {c.entry_id for c in r.l1.candidates} for e, r in zip(part.entries, back, strict=True))
        print(
            f"repair: {report.updated} entries redone ({report.chunks_embedded} chunks) in {report.seconds:.1f} s; "
            f"{sum(r.layer == 'L0+L1' for r in back)} / {len(back)} lookups L0+L1, {found} find their entry by vector"
        )
        assert all(r.l1.status == "ok" and r.layer == "L0+L1" for r in back)
        assert found == len(part.entries)
    finally:
        try:
            client.close()
        finally:
            stop_servers(settings.embedded_port)
    assert not port_open("127.0.0.1", settings.embedded_port)
