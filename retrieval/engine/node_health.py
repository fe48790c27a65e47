"""The nodes of any Weaviate a client reaches (embedded, a local cluster, managed or Kubernetes) and their
health, as the sidebar and the Corpus page show them and the check before a write at ALL reads them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class NodeStatus(StrEnum):
    """A node's status as `/v1/nodes` gives it (a member it no longer lists is UNAVAILABLE)."""

    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    UNAVAILABLE = "UNAVAILABLE"
    TIMEOUT = "TIMEOUT"


@dataclass(frozen=True)
class NodeHealth:
    """One node as `/v1/nodes` reports it."""

    name: str
    status: str  # HEALTHY, UNHEALTHY, UNAVAILABLE, TIMEOUT
    version: str = ""

    @property
    def healthy(self) -> bool:
        return self.status == NodeStatus.HEALTHY

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "version": self.version}


def node_health(client) -> tuple[NodeHealth, ...]:
    """Every node of the Weaviate `client` reaches, by name: `/v1/nodes`, plus the Raft members (`/v1/cluster/statistics`)
    it no longer lists, since gossip drops a dead node within seconds; `/v1/nodes` alone where the statistics do not
    answer. Raises what the client raises when `/v1/nodes` does not answer."""
    listed = tuple(NodeHealth(n.name, n.status, n.version) for n in client.cluster.nodes(output="minimal"))
    try:
        stats = client.cluster.statistics()
    except Exception:
        return listed
    members = {m.node_id for s in stats.statistics for m in s.raft.latest_configuration}
    return with_members(listed, members)


def with_members(listed: Sequence[NodeHealth], members: Iterable[str]) -> tuple[NodeHealth, ...]:
    """The nodes `/v1/nodes` listed, and each cluster member it did not list as UNAVAILABLE, by name."""
    named = {n.name for n in listed}
    gone = [NodeHealth(m, NodeStatus.UNAVAILABLE) for m in set(members) - named if m]
    return tuple(sorted([*listed, *gone], key=lambda n: n.name))
