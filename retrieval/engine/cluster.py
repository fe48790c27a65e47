"""A local multi-node Weaviate cluster from the built server binary (start, status, stop); node health is `node_health`.
The nodes are detached processes on loopback, each with its own ports and data directory; a state file in the cluster's
data directory records their names, ports and pids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.engine.build import BIND_ENV, BIND_HOST
from retrieval.engine.parent_death import process_alive
from retrieval.engine.ports import free_port, port_free
from retrieval.errors import WeaviateSetupError

STATE_FILE = "cluster.json"
MAX_NODES = 9
# Ports of a cluster started by hand (node i adds i, or 2*i where a port comes with its +1 neighbour). The ranges
# of MAX_NODES nodes neither overlap nor hold a port of the project's other servers (APP_PORTS).
BASE_PORTS = {"http": 8400, "grpc": 50400, "gossip": 7400, "raft": 8420, "profiling": 8480}
APP_PORTS = {"app": 8501, "serve --transport http": 8765, "embedded Weaviate": 8079, "embedded Weaviate gRPC": 50050}
NODE_ENV = {
    "ENABLE_MODULES": "",
    "DISABLE_TELEMETRY": "true",
    "LOG_LEVEL": "warning",
    "AUTOSCHEMA_ENABLED": "false",
    "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "true",
    "QUERY_DEFAULTS_LIMIT": "20",
    "CLUSTER_IN_LOCALHOST": "true",  # without it Raft never forms on one machine ("no known peers")
    **BIND_ENV,  # every port on 127.0.0.1 (gRPC and data port: our build's patch), the profiler off
}


@dataclass(frozen=True)
class ClusterNode:
    """One node: its name and ports. The data port is gossip + 1; Raft's internal RPC port is raft + 1
    (on localhost the server dials Raft port + 1 whatever RAFT_INTERNAL_RPC_PORT says)."""

    name: str
    http_port: int
    grpc_port: int
    gossip_port: int
    raft_port: int
    profiling_port: int
    pid: int | None = None

    @property
    def data_port(self) -> int:
        return self.gossip_port + 1

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def ports(self) -> tuple[int, ...]:
        return (
            self.http_port,
            self.grpc_port,
            self.gossip_port,
            self.data_port,
            self.raft_port,
            self.raft_port + 1,
            self.profiling_port,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "http_port": self.http_port, "grpc_port": self.grpc_port, "pid": self.pid}


@dataclass(frozen=True)
class ClusterState:
    """What the state file holds: the data directory, the binary and the nodes (pid None: not started)."""

    data_dir: Path
    binary: Path
    nodes: tuple[ClusterNode, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.to_dict() for n in self.nodes]}

    def node_dir(self, node: ClusterNode) -> Path:
        return self.data_dir / node.name

    def log_path(self, node: ClusterNode) -> Path:
        return self.data_dir / f"{node.name}.log"

    def with_pid(self, name: str, pid: int | None) -> ClusterState:
        return dataclasses.replace(
            self, nodes=tuple(dataclasses.replace(n, pid=pid) if n.name == name else n for n in self.nodes)
        )

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        body = {"binary": str(self.binary), "nodes": [dataclasses.asdict(n) for n in self.nodes]}
        tmp = self.data_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.data_dir / STATE_FILE)

    @classmethod
    def load(cls, data_dir: Path) -> ClusterState:
        path = Path(data_dir) / STATE_FILE
        if not path.is_file():
            raise WeaviateSetupError(
                f"{path}: no cluster state file (start a cluster with `cluster start --data-dir {data_dir}`)"
            )
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            nodes = tuple(ClusterNode(**n) for n in raw["nodes"])
            binary = Path(raw["binary"])
        except (ValueError, KeyError, TypeError) as exc:
            raise WeaviateSetupError(f"{path}: not a cluster state file ({type(exc).__name__}: {exc})") from exc
        if not nodes:
            raise WeaviateSetupError(f"{path}: field 'nodes' is empty")
        return cls(Path(data_dir), binary, nodes)


def plan_nodes(count: int, *, ports: Callable[[int], dict[str, int]] | None = None) -> tuple[ClusterNode, ...]:
    """Names and ports of `count` nodes: node0, node1, ... `ports(i)` gives node i's ports (default: the
    fixed ranges of BASE_PORTS)."""
    if not 1 <= count <= MAX_NODES:
        raise WeaviateSetupError(f"--nodes {count}: a local cluster has 1 to {MAX_NODES} nodes")
    ports = ports or fixed_ports
    return tuple(ClusterNode(name=f"node{i}", **ports(i)) for i in range(count))


def fixed_ports(i: int) -> dict[str, int]:
    b = BASE_PORTS
    return {
        "http_port": b["http"] + i,
        "grpc_port": b["grpc"] + i,
        "gossip_port": b["gossip"] + 2 * i,
        "raft_port": b["raft"] + 2 * i,
        "profiling_port": b["profiling"] + i,
    }


def free_ports(i: int) -> dict[str, int]:
    """Free ports for node i (the tests' and the bench's clusters); gossip and Raft with their +1 neighbour free too."""
    return {
        "http_port": free_port(),
        "grpc_port": free_port(),
        "gossip_port": free_port(pair=True),
        "raft_port": free_port(pair=True),
        "profiling_port": free_port(),
    }


def node_env(node: ClusterNode, nodes: Sequence[ClusterNode], data_dir: Path) -> dict[str, str]:
    """The environment that makes `node` one of `nodes` (node0 is the one the others join by gossip)."""
    first = nodes[0]
    env = {
        **NODE_ENV,
        "PERSISTENCE_DATA_PATH": str(data_dir / node.name),
        "CLUSTER_HOSTNAME": node.name,
        "CLUSTER_GOSSIP_BIND_PORT": str(node.gossip_port),
        "CLUSTER_DATA_BIND_PORT": str(node.data_port),
        "RAFT_PORT": str(node.raft_port),
        "RAFT_INTERNAL_RPC_PORT": str(node.raft_port + 1),
        "RAFT_JOIN": ",".join(f"{n.name}:{n.raft_port}" for n in nodes),
        "RAFT_BOOTSTRAP_EXPECT": str(len(nodes)),
        "GRPC_PORT": str(node.grpc_port),
        "GO_PROFILING_PORT": str(node.profiling_port),  # the profiler's default 6060 would clash
    }
    if node is not first:
        env["CLUSTER_JOIN"] = f"localhost:{first.gossip_port}"
    return env


# --- processes -----------------------------------------------------------------------------------------
def is_our_node(pid: int | None, node: ClusterNode) -> bool:
    """True when `pid` is a live Weaviate server started with `--port <node's http port>`: a pid the
    state file names but that now belongs to some other process is never signalled."""
    if not process_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if not argv or not os.path.basename(argv[0]).startswith(b"weaviate") or b"--port" not in argv:
        return False
    i = argv.index(b"--port")
    return i + 1 < len(argv) and argv[i + 1] == str(node.http_port).encode()


def start_node(state: ClusterState, name: str) -> ClusterState:
    """Start one node of `state` detached (its own session, output to <data_dir>/<name>.log); returns the
    state with its pid, saved. Used by `start_cluster` and to bring a stopped or killed node back."""
    node = next((n for n in state.nodes if n.name == name), None)
    if node is None:
        raise WeaviateSetupError(f"no node named {name!r} in {state.data_dir / STATE_FILE}")
    if is_our_node(node.pid, node):
        raise WeaviateSetupError(f"{name} is already running (pid {node.pid})")
    taken = [p for p in node.ports() if not port_free(p)]
    if taken:
        raise WeaviateSetupError(
            f"{name}: port(s) {', '.join(map(str, taken))} on 127.0.0.1 in use; stop what holds them or use another --data-dir"
        )
    state.node_dir(node).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **node_env(node, state.nodes, state.data_dir)}
    argv = [str(state.binary), "--host", BIND_HOST, "--port", str(node.http_port), "--scheme", "http"]
    log = str(state.log_path(node))
    # posix_spawn, not Popen: the node outlives this process, and a collected Popen would warn that it still runs.
    pid = os.posix_spawn(
        argv[0],
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    state = state.with_pid(name, pid)
    state.save()
    return state


def start_cluster(
    binary: Path,
    data_dir: Path,
    count: int = 3,
    *,
    ports: Callable[[int], dict[str, int]] | None = None,
    timeout_s: float = 180.0,
) -> ClusterState:
    """Start `count` nodes and return once every node is ready and `/v1/nodes` lists them all healthy. A stopped cluster's
    directory starts again on its own ports (Raft state pins them). On a time-out the nodes are stopped and the error
    says which node was not ready, and why."""
    data_dir = Path(data_dir).resolve()
    if not Path(binary).is_file():
        raise WeaviateSetupError(f"the Weaviate server binary {binary} is missing: run scripts/setup.sh to build it")
    if (data_dir / STATE_FILE).is_file():
        old = ClusterState.load(data_dir)
        running = [n.name for n in old.nodes if is_our_node(n.pid, n)]
        if running:
            raise WeaviateSetupError(f"a cluster already runs from {data_dir} ({', '.join(running)}); stop it first")
        if len(old.nodes) != count:
            raise WeaviateSetupError(
                f"{data_dir} holds a {len(old.nodes)}-node cluster, not {count}: use --nodes {len(old.nodes)} or other --data-dir"
            )
        state = ClusterState(data_dir, Path(binary), tuple(dataclasses.replace(n, pid=None) for n in old.nodes))
    else:
        state = ClusterState(data_dir, Path(binary), plan_nodes(count, ports=ports))
    state.save()
    try:
        for node in state.nodes:
            state = start_node(state, node.name)
        wait_formed(state, timeout_s=timeout_s)
    except BaseException:
        stop_cluster(state.data_dir, grace_s=5.0)
        raise
    return state


# --- readiness and health ------------------------------------------------------------------------------
def _get_json(url: str, timeout: float = 3.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as res:
        return json.loads(res.read() or b"null")


def node_ready(node: ClusterNode, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{node.url}/v1/.well-known/ready", timeout=timeout) as res:
            return res.status == 200
    except (OSError, urllib.error.URLError):
        return False


def nodes_seen_by(node: ClusterNode, timeout: float = 5.0) -> dict[str, str]:
    """name -> status (HEALTHY, UNHEALTHY, UNAVAILABLE, TIMEOUT...) of every node `node` knows; {} when it does not answer."""
    try:
        body = _get_json(f"{node.url}/v1/nodes", timeout=timeout)
    except (OSError, ValueError, urllib.error.URLError):
        return {}
    return {n.get("name", "?"): n.get("status", "?") for n in (body or {}).get("nodes") or []}


def why_not_ready(state: ClusterState) -> list[str]:
    """For each node that is not ready: its name, ports and why (process ended, not ready, not seen as
    HEALTHY by the others), with the last line of its log. Empty when the cluster has formed."""
    problems = []
    seen: dict[str, str] = {}
    for node in state.nodes:
        if not process_alive(node.pid):
            problems.append(f"{node.name} (http {node.http_port}): its process {node.pid} has ended{_last_log_line(state, node)}")
        elif not node_ready(node):
            problems.append(
                f"{node.name} (http {node.http_port}): /v1/.well-known/ready does not answer 200{_last_log_line(state, node)}"
            )
        elif not seen:
            seen = nodes_seen_by(node)
    if not problems:
        for node in state.nodes:
            if seen.get(node.name) != "HEALTHY":
                problems.append(f"{node.name} (http {node.http_port}): /v1/nodes says {seen.get(node.name, 'not listed')}")
    return problems


def _last_log_line(state: ClusterState, node: ClusterNode) -> str:
    try:
        lines = state.log_path(node).read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f"; last log line: {lines[-1][:300]}" if lines else ""


def wait_formed(state: ClusterState, *, timeout_s: float = 180.0) -> None:
    """Wait until every node is ready and listed HEALTHY by `/v1/nodes`; raise naming the nodes that are not."""
    deadline = time.monotonic() + timeout_s
    while True:
        problems = why_not_ready(state)
        if not problems:
            return
        dead = [p for p in problems if "has ended" in p]
        if dead or time.monotonic() > deadline:
            raise WeaviateSetupError(
                f"the {len(state.nodes)}-node cluster in {state.data_dir} did not form"
                + (":" if dead else f" within {timeout_s:g} s:")
                + " "
                + "; ".join(problems)
            )
        time.sleep(0.5)


def cluster_status(data_dir: Path) -> list[dict[str, Any]]:
    """Each node of the state file: name, ports, pid, whether its process runs and answers ready, and its
    status as the first answering node's `/v1/nodes` gives it."""
    state = ClusterState.load(data_dir)
    running = {n.name: is_our_node(n.pid, n) for n in state.nodes}
    ready = {n.name: running[n.name] and node_ready(n) for n in state.nodes}
    seen: dict[str, str] = next((s for n in state.nodes if ready[n.name] and (s := nodes_seen_by(n))), {})
    return [
        {
            **n.to_dict(),
            "running": running[n.name],
            "ready": ready[n.name],
            "status": seen.get(n.name, "UNKNOWN" if not seen else "not listed") if running[n.name] else "STOPPED",
        }
        for n in state.nodes
    ]


def stop_node(node: ClusterNode, *, grace_s: float = 10.0) -> bool:
    """SIGTERM to the node's pid (only if it is still that node's server), SIGKILL after `grace_s`.
    True when a process was stopped."""
    if node.pid is None or not is_our_node(node.pid, node):
        return False
    os.kill(node.pid, signal.SIGTERM)
    _wait_or_kill(node.pid, grace_s)
    return True


def _wait_or_kill(pid: int, grace_s: float) -> None:
    """Wait for a process already sent SIGTERM to end; SIGKILL it after `grace_s`. No second identity check:
    a process on its way out no longer shows its command line."""
    deadline = time.monotonic() + grace_s
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def stop_cluster(data_dir: Path, *, grace_s: float = 10.0) -> list[str]:
    """Stop every node of the state file (all get SIGTERM first, then each its SIGKILL after the grace);
    the state file stays, without pids, so `start` can bring the same cluster back. Returns the names stopped."""
    state = ClusterState.load(data_dir)
    ours = {n.name: n.pid for n in state.nodes if n.pid is not None and is_our_node(n.pid, n)}
    for pid in ours.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in ours.values():
        _wait_or_kill(pid, grace_s)
    stopped = list(ours)
    for node in state.nodes:
        state = state.with_pid(node.name, None)
    state.save()
    return stopped
