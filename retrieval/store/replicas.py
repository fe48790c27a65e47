"""Whether every replica of a collection's shards sits on a healthy node: what consistency ALL promises a write.
Weaviate 1.38 writes at ALL to the replicas it can still resolve once gossip has dropped a dead node, so an ingest at
ALL asks first (`shortfall`) and refuses while a replica is missing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.engine.node_health import NodeHealth, NodeStatus, node_health


@dataclass(frozen=True)
class ReplicaShortfall:
    """Shards of a collection held by fewer healthy nodes than its replication factor."""

    collection: str
    factor: int
    shard_count: int
    held: tuple[tuple[str, int], ...]  # (shard, healthy nodes holding it) for each shard short of replicas
    missing_shards: int  # shards no healthy node reports at all
    unhealthy: tuple[NodeHealth, ...]

    def __bool__(self) -> bool:
        return bool(self.held or self.missing_shards)

    def message(self) -> str:
        parts = [f"shard {name} on {n} of {self.factor}" for name, n in self.held]
        if self.missing_shards:
            parts.append(f"{self.missing_shards} shard(s) on no healthy node")
        down = ", ".join(f"{n.name} {n.status}" for n in self.unhealthy) or "none listed"
        return (
            f"consistency ALL needs all {self.factor} replicas of each of the {self.shard_count} shard(s) of "
            f"{self.collection!r} on healthy nodes: {'; '.join(parts)} (nodes not healthy: {down}). "
            "Bring the node(s) back, or write at QUORUM (LOOKUP_CONSISTENCY)"
        )


def count_short(
    collection: str, factor: int, shard_count: int, shards_held: Iterable[str], nodes: Iterable[NodeHealth] = ()
) -> ReplicaShortfall:
    """The shortfall from what the healthy nodes report: `shards_held` names each shard once per healthy
    node that holds it. Pure."""
    held = Counter(shards_held)
    short = tuple(sorted((name, n) for name, n in held.items() if n < factor))
    return ReplicaShortfall(
        collection,
        factor,
        shard_count,
        short,
        max(shard_count - len(held), 0),
        tuple(n for n in nodes if not n.healthy),
    )


def shortfall(client, collection: str) -> ReplicaShortfall:
    """Ask Weaviate: the collection's replication factor and shard count, and which healthy node holds
    which shard (`/v1/nodes?output=verbose`); and, only when a replica is missing, which nodes are not
    healthy (`node_health`). Raises what the client raises."""
    config = client.collections.use(collection).config.get()
    factor = config.replication_config.factor if config.replication_config else 1
    shard_count = config.sharding_config.actual_count if config.sharding_config else 1
    verbose = client.cluster.nodes(collection=collection, output="verbose")
    shards = [s.name for n in verbose if n.status == NodeStatus.HEALTHY for s in n.shards or ()]
    short = count_short(collection, factor, shard_count, shards)
    # The nodes only name the culprits in the message: asked for when a replica is missing.
    return count_short(collection, factor, shard_count, shards, node_health(client)) if short else short
