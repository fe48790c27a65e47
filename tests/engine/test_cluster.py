"""Faults on a real 3-node Weaviate cluster (retrieval.engine.cluster): kill -9 of a node during concurrent lookups,
two nodes down, ingest while a node is down, and the CLI lookup against node 0 with another node killed.

One cluster for the module, on free ports with a temporary data directory, stopped at the end. The sample
corpus is embedded once (a memo in front of the real model: the second ingest does not embed again) and
stored with replication factor 3 and 3 shards. Nothing is mocked; every fault is a real SIGKILL.
Run with `pytest -s` to see the figures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from weaviate.util import generate_uuid5

from retrieval.config import REPO_ROOT, child_environment
from retrieval.core.chunking import chunk_entry
from retrieval.core.corpus import Corpus
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.engine.cluster import (
    ClusterState,
    free_ports,
    nodes_seen_by,
    start_cluster,
    start_node,
    stop_cluster,
    wait_formed,
)
from retrieval.engine.node_health import node_health
from retrieval.engine.server import connect, embedded_binary
from retrieval.errors import L1Error
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.store.factory import knowledge_store

from ..conftest import SAMPLE_CORPUS
from ..helpers.processes import alive, wait_until

pytestmark = pytest.mark.slow
FORM_S = 240.0  # a cluster (re)forming on a busy 2-core machine
COLLECTION = "ClusterSample"


class MemoEmbedder:
    """The real model, remembering the vectors of chunk texts it embedded, so that a second ingest of
    the same corpus into another collection does not embed again (the slow part on 2 busy cores)."""

    def __init__(self, model) -> None:
        self.model = model
        self.memo: dict[str, Any] = {}
        self.tokenizer, self.max_tokens, self.dimensions = model.tokenizer, model.max_tokens, model.dimensions

    def embed(self, texts, **kw):
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            self.memo.update(zip(todo, self.model.embed(todo, **kw), strict=True))
        return np.vstack([self.memo[t] for t in texts]) if texts else self.model.embed([])

    def embed_query(self, text):
        return self.model.embed_query(text)

    def prime(self, texts, **kw):
        self.model.prime(texts, **kw)


# --- fixtures ------------------------------------------------------------------------------------------
class Cluster:
    """The module's cluster: its state (pids follow restarts) and helpers to kill and bring back nodes."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def node(self, i: int):
        return self.state.nodes[i]

    def kill(self, *indexes: int) -> None:
        for i in indexes:
            os.kill(self.node(i).pid, signal.SIGKILL)
        names = {self.node(i).name for i in indexes}
        survivor = next(n for j, n in enumerate(self.state.nodes) if j not in indexes)
        wait_until(
            lambda: all(nodes_seen_by(survivor).get(n) != "HEALTHY" for n in names),
            60,
            f"{survivor.name} sees {sorted(names)} down",
        )
        if len(self.state.nodes) - len(indexes) > len(self.state.nodes) // 2:
            # A majority is left: once it has a Raft leader again (the killed node may have led), schema reads
            # answer. Until then a schema read times out, which is the election, not what a test is about.
            wait_until(lambda: schema_answers(survivor), 90, f"{survivor.name} answers schema reads")

    def wait_forgotten(self, i: int) -> None:
        """Until gossip has dropped node i: node 0 (or 1) no longer lists it in /v1/nodes, a few seconds
        after its death. From then on only the Raft configuration still names it."""
        name = self.node(i).name
        survivor = self.node(1 if i == 0 else 0)

        def forgotten() -> bool:
            seen = nodes_seen_by(survivor)  # {} when it does not answer, which is not "forgotten"
            return bool(seen) and name not in seen

        wait_until(forgotten, 90, f"{survivor.name} no longer lists {name} in /v1/nodes")

    def revive_the_dead(self) -> None:
        """Bring back every node whose process has ended, so that one failed test does not fail the next."""
        dead = [i for i, n in enumerate(self.state.nodes) if not alive(n.pid)]
        if dead:
            self.revive(*dead)

    def revive(self, *indexes: int) -> None:
        for i in indexes:
            self.state = start_node(self.state, self.node(i).name)
        wait_formed(self.state, timeout_s=FORM_S)


def schema_answers(node) -> bool:
    """The node answers a schema read (which needs a Raft leader) within 3 s."""
    try:
        with urllib.request.urlopen(f"{node.url}/v1/schema", timeout=3) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def cluster(base_settings, tmp_path_factory):
    data = tmp_path_factory.mktemp("cluster")
    t0 = time.monotonic()
    state = start_cluster(embedded_binary(base_settings), data, 3, ports=free_ports, timeout_s=FORM_S)
    print(f"\n3-node cluster formed in {time.monotonic() - t0:.1f} s (load average {os.getloadavg()[0]:.1f})")
    yield Cluster(state)
    stop_cluster(data)


@pytest.fixture(autouse=True)
def nodes_back_after_each_test(request):
    """A test that fails between killing a node and reviving it leaves the node down: bring it back."""
    yield
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").revive_the_dead()


@pytest.fixture(scope="module")
def memo_embedder(embedder):
    return MemoEmbedder(embedder)


def cluster_settings(base_settings, cluster, i: int = 0, **changes):
    node = cluster.node(i)
    return base_settings.with_(
        weaviate_url=node.url,
        remote_grpc_port=node.grpc_port,
        replication_factor=3,
        shards=3,
        consistency="ONE",
        collection=COLLECTION,
        **changes,
    )


@pytest.fixture(scope="module")
def replicated(base_settings, cluster, memo_embedder, sample_corpus):
    """The sample corpus in COLLECTION, created through node 0 with the settings' replication factor 3."""
    settings = cluster_settings(base_settings, cluster)
    client = connect(settings)
    store = knowledge_store(client, settings)  # replication, shards and consistency come from the settings
    store.drop()
    t0 = time.monotonic()
    report = indexing.ingest(store, sample_corpus, memo_embedder)
    print(f"\ningested {report.chunks_embedded} chunks in {time.monotonic() - t0:.1f} s (load {os.getloadavg()[0]:.1f})")
    yield settings, client, store
    client.close()


def queries_for(corpus: Corpus) -> list[str]:
    """Entry titles: each has an L0 match, so a lookup that L1 answers is L0+L1."""
    return [e.title for e in corpus.entries][:24]


def services_for(store, embedder, corpus, recorder=None) -> LookupServices:
    return LookupServices(l0=L0Index(corpus.entries), embedder=embedder, store=store, recorder=recorder)


# --- the tests -----------------------------------------------------------------------------------------
def test_collection_is_created_with_the_settings_replication(replicated):
    _, client, store = replicated
    config = store.collection.config.get()
    assert config.replication_config.factor == 3
    assert config.sharding_config is not None and config.sharding_config.desired_count == 3
    assert store.consistency == "ONE"
    health = node_health(client)
    assert [(n.name, n.status) for n in health] == [("node0", "HEALTHY"), ("node1", "HEALTHY"), ("node2", "HEALTHY")]


def test_kill_9_of_a_node_during_four_threads_of_lookups(replicated, cluster, memo_embedder, sample_corpus, tmp_path):
    settings, _, store = replicated
    queries = queries_for(sample_corpus)
    memo_embedder.prime(queries)  # the lookups then time L1, not the model
    recorder = InvocationStore(tmp_path / "inv.duckdb")
    services = services_for(store, memo_embedder, sample_corpus, recorder)
    results: list = []
    errors: list = []
    stop = threading.Event()
    lock = threading.Lock()

    def worker(t: int) -> None:
        i = t
        while not stop.is_set():
            try:
                r = lookup_knowledge(queries[i % len(queries)], services, settings.options())
                with lock:
                    results.append((time.monotonic(), r))
            except Exception as exc:  # reported below
                errors.append(repr(exc))
            i += 4

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(results) >= 20, 120, "20 lookups before the kill")
        killed_at = time.monotonic()
        cluster.kill(2)
        seen_down = time.monotonic()
        after = len(results)
        wait_until(lambda: len(results) >= after + 40, 180, "40 more lookups with node2 down")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        recorder.close()
    during = [r for at, r in results if at >= killed_at]
    bad = [(r.layer, r.l1.status, r.l1.error) for _, r in results if r.layer != "L0+L1" or r.l1.status != "ok"]
    print(
        f"\n{len(results)} lookups, {len(during)} after the kill -9 (node2 seen down {seen_down - killed_at:.1f} s later); "
        f"slowest after the kill {max(r.timings_ms['total'] for r in during):.0f} ms (load {os.getloadavg()[0]:.1f})"
    )
    assert not errors, errors[:3]
    assert not bad, f"{len(bad)} lookups not L0+L1 with L1 ok, e.g. {bad[:3]}"
    cluster.revive(2)


def test_two_of_three_nodes_down(replicated, cluster, memo_embedder, sample_corpus, tmp_path, base_settings):
    """Through node 1, which goes down with node 2: L0 fallback with the error recorded, L0+L1 again once
    they return. Through node 0, which keeps a replica of every shard (factor 3), a lookup at consistency ONE
    goes on answering from its own replicas; at QUORUM and ALL the outcome is printed (on this machine:
    the search waited for the dead replicas until the L1 time-out, so L0 fallback)."""
    settings, client0, _ = replicated
    queries = queries_for(sample_corpus)[:3]
    memo_embedder.prime(queries)
    settings1 = cluster_settings(base_settings, cluster, 1, l1_timeout_s=3.0)
    client1 = connect(settings1)
    recorder = InvocationStore(tmp_path / "inv.duckdb")
    via1 = services_for(knowledge_store(client1, settings1), memo_embedder, sample_corpus, recorder)
    try:
        assert lookup_knowledge(queries[0], via1, settings1.options()).layer == "L0+L1"
        cluster.kill(1, 2)
        down = [lookup_knowledge(q, via1, settings1.options()) for q in queries]
        for r in down:
            assert (r.layer, r.fallback) == ("L0", True)
            assert r.l1.status in ("failed", "unavailable") and r.l1.error
            assert r.results, "the L0 fallback answers"
        rows = recorder.query(
            "SELECT id, layer, l1_status, error FROM tool_invocation WHERE id IN (" + ",".join("?" * len(down)) + ")",
            [r.invocation_id for r in down],
        )
        assert len(rows) == len(down)
        assert set(rows["layer"]) == {"L0"} and rows["error"].notna().all()
        print(f"\nrecorded through node1 with node1 and node2 down: {rows['l1_status'].iloc[0]}: {rows['error'].iloc[0][:160]}")
        via0 = services_for(knowledge_store(client0, settings.with_(consistency="ONE")), memo_embedder, sample_corpus)
        r = lookup_knowledge(queries[0], via0, settings.options())
        assert (r.layer, r.l1.status) == ("L0+L1", "ok"), r.l1.error
        short = settings.with_(l1_timeout_s=3.0)
        for level in ("QUORUM", "ALL"):
            via0 = services_for(knowledge_store(client0, short.with_(consistency=level)), memo_embedder, sample_corpus)
            r = lookup_knowledge(queries[0], via0, short.options())
            print(f"through node0 at {level}: {r.layer}, L1 {r.l1.status} {(r.l1.error or '')[:120]}")
        cluster.revive(1, 2)
        back: list = []

        def answered() -> bool:
            back.append(lookup_knowledge(queries[1], via1, settings1.options()))
            return back[-1].layer == "L0+L1"

        wait_until(answered, 60, "a lookup through node1 is L0+L1 again")
        assert back[-1].l1.status == "ok"
    finally:
        recorder.close()
        client1.close()


def _on_node(cluster: Cluster, collection: str, uuid: str, node: str) -> bool:
    """The object is in `node`'s own replica (asked through node 0 with node_name)."""
    url = f"{cluster.node(0).url}/v1/objects/{collection}/{uuid}?node_name={node}"
    try:
        with urllib.request.urlopen(url, timeout=10) as res:
            return res.status == 200
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise


def missing_per_node(cluster: Cluster, collection: str, uuids: list[str]) -> dict[str, int]:
    names = [n.name for n in cluster.state.nodes]
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda p: _on_node(cluster, collection, *p), [(u, n) for n in names for u in uuids]))
    return {n: len(uuids) - sum(found[i * len(uuids) : (i + 1) * len(uuids)]) for i, n in enumerate(names)}


def test_ingest_while_a_node_is_down_reaches_it_when_it_returns(replicated, cluster, memo_embedder, sample_corpus):
    """Written at QUORUM with node2 down; after node2 returns, Weaviate's async replication (on by default
    for factor > 1 in 1.38, every 30 s) copies what it missed, without any read. At ALL the ingest is refused,
    also once gossip has dropped node2 (when Weaviate itself would write at ALL to the two replicas left)."""
    settings, client, _ = replicated
    name = "ClusterIngest"
    store = knowledge_store(client, settings.with_(consistency="QUORUM"), collection=name)
    store.drop()
    store.ensure_collection()  # the schema change needs the Raft quorum: made with every node up
    uuids = [
        str(generate_uuid5(f"{e.entry_id}#{c.index}"))
        for e in sample_corpus.entries
        for c in chunk_entry(e, memo_embedder.tokenizer, memo_embedder.max_tokens)
    ]
    cluster.kill(2)
    cluster.wait_forgotten(2)
    with pytest.raises(L1Error, match="replicas"):
        indexing.ingest(knowledge_store(client, settings.with_(consistency="ALL"), collection=name), sample_corpus, memo_embedder)
    report = indexing.ingest(store, sample_corpus, memo_embedder)
    assert report.chunks_embedded == len(uuids)
    cluster.revive(2)
    returned = time.monotonic()
    gaps: list[dict[str, int]] = []

    def complete() -> bool:
        gaps.append(missing_per_node(cluster, name, uuids))
        return not any(gaps[-1].values())

    deadline = time.monotonic() + 150
    while not complete() and time.monotonic() < deadline:
        time.sleep(2)
    print(
        f"\n{len(uuids)} chunks written with node2 down; missing per node right after its return {gaps[0]}, "
        f"then {gaps[-1]} {time.monotonic() - returned:.0f} s later (load {os.getloadavg()[0]:.1f})"
    )
    assert gaps[0]["node0"] == gaps[0]["node1"] == 0
    assert not any(gaps[-1].values()), (
        f"after 150 s, chunks are still missing on a node: {gaps[-1]} of {len(uuids)} (async replication did not "
        "repair them; a read at consistency ALL would repair each object it reads)"
    )
    store.drop()


def test_cli_lookup_at_node0_with_another_node_killed(replicated, cluster, tmp_path):
    """The CLI looks up through LOOKUP_WEAVIATE_URL at node 0 of the replicated cluster while another node is killed."""
    cluster.kill(1)
    env = child_environment()
    env.update(
        LOOKUP_WEAVIATE_URL=cluster.node(0).url,
        LOOKUP_WEAVIATE_REMOTE_GRPC_PORT=str(cluster.node(0).grpc_port),
        LOOKUP_REPLICATION_FACTOR="3",
        LOOKUP_CONSISTENCY="ONE",
        LOOKUP_COLLECTION=COLLECTION,
        LOOKUP_CORPUS_DIR=str(SAMPLE_CORPUS),
        LOOKUP_DATA_DIR=str(tmp_path),
    )
    res = subprocess.run(
        [sys.executable, "-m", "retrieval", "lookup", "Pod is crash looping.", "--json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert (out["layer"], out["l1"]["status"]) == ("L0+L1", "ok"), out["l1"]
    assert out["results"][0]["entry_id"] == "kubernetes/PodCrashLoopBackOff"
    cluster.revive(1)


def test_sidebar_and_corpus_page_show_node_health(cluster, monkeypatch, tmp_path):
    """Connected to node 0 of the cluster, the sidebar counts the healthy nodes and the Corpus page lists them;
    after a kill -9 the count drops (once the 10 s cache of /v1/nodes is cleared), and the dead node is still
    counted once gossip has dropped it from /v1/nodes."""
    from app_support import resources, sidebar

    from ..helpers.app import assert_clean, open_app, point_app_at

    node = cluster.node(0)
    point_app_at(monkeypatch, tmp_path, url=node.url, grpc_port=node.grpc_port, collection=COLLECTION, corpus=SAMPLE_CORPUS)
    resources.clear_all(keep_model=True)  # cached connections outlive an AppTest in this process
    sidebar._node_health.clear()
    at = open_app("Corpus")
    badges = [m.value for m in at.sidebar.markdown]
    assert any("Cluster: 3 of 3 nodes healthy" in b for b in badges), badges
    frames = [df.value for df in at.dataframe if "status" in df.value.columns and "name" in df.value.columns]
    assert frames and list(frames[0]["name"]) == ["node0", "node1", "node2"]
    assert set(frames[0]["status"]) == {"HEALTHY"}
    cluster.kill(2)
    cluster.wait_forgotten(2)
    after_kill = {"node0": "HEALTHY", "node1": "HEALTHY", "node2": "UNAVAILABLE"}
    shown: list[dict[str, str]] = []

    def shows_one_node_down() -> bool:
        """One read of /v1/nodes through the page (past the sidebar's 10 s cache). On a busy machine a live node
        slow to answer node 0's status probe is listed TIMEOUT (or UNHEALTHY) for that read, so the page is read
        again until it shows the state after the kill."""
        sidebar._node_health.clear()
        at.run()
        frames = [df.value for df in at.dataframe if "status" in df.value.columns and "name" in df.value.columns]
        shown.append(dict(zip(frames[0]["name"], frames[0]["status"], strict=True)) if frames else {})
        return shown[-1] == after_kill

    wait_until(
        shows_one_node_down,
        90,
        lambda: f"the Corpus page shows node2 down and node0, node1 healthy (shown in {len(shown)} reads: {shown})",
    )
    assert_clean(at)
    badges = [m.value for m in at.sidebar.markdown]
    assert any(":orange-badge[Cluster: 2 of 3 nodes healthy]" in b for b in badges), badges
    assert any("node2 UNAVAILABLE" in c.value for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    resources.clear_all(keep_model=True)
    cluster.revive(2)
