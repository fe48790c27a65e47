"""retrieval.store.replicas: the pure count, and the check against the real embedded Weaviate of the test session
(one node, factor 1). The multi-node case, a replica on a killed node, is in test_cluster."""

from __future__ import annotations

import pytest

from retrieval.core.corpus import Corpus, Entry
from retrieval.engine.node_health import NodeHealth
from retrieval.errors import L1Error
from retrieval.store import indexing
from retrieval.store.indexing import require_replicas
from retrieval.store.replicas import count_short, shortfall
from retrieval.store.weaviate_store import KnowledgeStore

UP = (NodeHealth("node0", "HEALTHY"), NodeHealth("node1", "HEALTHY"))


def test_every_replica_on_a_healthy_node_is_no_shortfall():
    short = count_short("Kb", 2, 2, ["s1", "s2", "s1", "s2"], UP)
    assert not short and short.held == () and short.missing_shards == 0


def test_a_shard_short_of_replicas_and_a_shard_on_no_node_are_named():
    nodes = (*UP, NodeHealth("node2", "UNAVAILABLE"))
    short = count_short("Kb", 3, 3, ["s1", "s1", "s1", "s2", "s2"], nodes)
    assert short and short.held == (("s2", 2),) and short.missing_shards == 1
    message = short.message()
    needles = ("all 3 replicas", "3 shard(s) of 'Kb'", "shard s2 on 2 of 3", "1 shard(s) on no healthy node")
    for needle in (*needles, "node2 UNAVAILABLE", "QUORUM"):
        assert needle in message, (needle, message)


def test_the_live_single_node_has_every_replica(weaviate_client, embedder):
    store = KnowledgeStore(weaviate_client, "TReplicasAll", consistency="ALL")
    store.drop()
    try:
        entry = Entry("x/A", "A", "x", "alpha text", (), ())
        assert indexing.ingest(store, Corpus("mem", (entry,)), embedder).added == 1  # the check passes: nothing refused
        short = shortfall(weaviate_client, store.name)
        assert (bool(short), short.factor, short.shard_count, short.held) == (False, 1, 1, ())
    finally:
        store.drop()


def test_a_collection_that_is_not_there_is_an_l1_error_at_all(weaviate_client):
    store = KnowledgeStore(weaviate_client, "TReplicasMissing", consistency="ALL")
    store.drop()
    with pytest.raises(L1Error, match="TReplicasMissing"):
        require_replicas(store)
