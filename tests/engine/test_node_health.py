"""retrieval.engine.node_health: merging /v1/nodes with the Raft members, without a server. The live cluster, with a
node killed until gossip drops it, is in test_cluster."""

from __future__ import annotations

from retrieval.engine.node_health import NodeHealth, with_members


def test_a_member_gossip_no_longer_lists_counts_as_unavailable():
    """Gossip drops a dead node from /v1/nodes within seconds; its Raft membership keeps it counted."""
    listed = (NodeHealth("node1", "HEALTHY", "1.38.11"), NodeHealth("node0", "HEALTHY", "1.38.11"))
    nodes = with_members(listed, ["node2", "node0", "node1", "node2", ""])
    assert [(n.name, n.status, n.healthy) for n in nodes] == [
        ("node0", "HEALTHY", True),
        ("node1", "HEALTHY", True),
        ("node2", "UNAVAILABLE", False),
    ]
    assert with_members(listed, []) == (listed[1], listed[0])  # no Raft statistics: /v1/nodes alone, by name
