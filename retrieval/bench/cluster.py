"""`python -m retrieval bench --cluster N`: the same synthetic knowledge base on one Weaviate node and on an
N-node cluster (replication factor N, N shards), side by side: lookup p50/p95, ingest rate, node RSS.

Both servers are started here from the built binary (retrieval.store.cluster: the single node is a 1-node cluster
with the same settings), on free ports with temporary data, and stopped at the end. Chunks are embedded
once before either ingest, so both ingests time Weaviate's side only (chunking and inserts); lookups
alternate between the two query by query, with every query vector cached, because the machine's load drifts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench import synthetic
from retrieval.bench.common import machine_info, pct, write_results
from retrieval.config import Settings
from retrieval.core.chunking import chunk_entry
from retrieval.core.hints import L0Index
from retrieval.core.lookup import LookupServices, lookup_knowledge
from retrieval.store import indexing
from retrieval.store.cluster import ClusterState, free_ports, start_cluster, stop_cluster
from retrieval.store.embedding import Embedder
from retrieval.store.weaviate_server import connect, embedded_binary
from retrieval.store.weaviate_store import KnowledgeStore

COLLECTION = "BenchCluster"


class _Embedded:
    """The real model in front of a memo of chunk vectors: both ingests then reuse one embedding pass."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.memo: dict[str, np.ndarray] = {}
        self.tokenizer, self.max_tokens, self.dimensions = model.tokenizer, model.max_tokens, model.dimensions

    def embed(self, texts, **kw) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            self.memo.update(zip(todo, self.model.embed(todo, batch_size=64), strict=True))
        return np.vstack([self.memo[t] for t in texts]) if len(texts) else self.model.embed([])

    def embed_query(self, text: str) -> np.ndarray:
        return self.model.embed_query(text)


def node_rss_mb(state: ClusterState) -> dict[str, dict[str, float]]:
    """Peak (VmHWM) and current RSS of each node's server process."""
    out = {}
    for node in state.nodes:
        try:
            status = Path(f"/proc/{node.pid}/status").read_text()
        except OSError:
            continue
        f = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith(("VmHWM", "VmRSS"))}
        out[node.name] = {"peak_mb": round(f["VmHWM"] / 1024, 1), "now_mb": round(f["VmRSS"] / 1024, 1)}
    return out


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run_cluster_bench(
    settings: Settings,
    *,
    nodes: int = 3,
    size: int = 1000,
    queries: int = 200,
    out_dir: Path = Path("bench/results"),
    log: Callable[[str], None] | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Measure one node against `nodes` nodes at `size` entries (one short body per entry, 40-80 words);
    write `<date>-bench-cluster-<nodes>-<size>.md/.json` to `out_dir`; return the figures."""
    log = log or (lambda m: None)
    if nodes < 2 or size < 1 or queries < 1:
        raise ValueError(f"--cluster {nodes} must be at least 2, the size ({size}) and --queries ({queries}) at least 1")
    started, load_start = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
    seed = int(time.time()) % 100_000 if seed is None else seed
    workdir = Path(tempfile.mkdtemp(prefix="lookup-bench-cluster-"))
    binary = embedded_binary(settings)
    consistency = settings.consistency or "QUORUM"
    sides: dict[str, dict[str, Any]] = {}
    clients: dict[str, Any] = {}
    states: dict[str, ClusterState] = {}
    try:
        corpus = synthetic.make_corpus(size, seed=seed + size, body=synthetic.SHORT)
        model = _Embedded(Embedder(settings.embedding_model, model_dir=settings.model_dir))
        texts = [c.text for e in corpus.entries for c in chunk_entry(e, model.tokenizer, model.max_tokens)]
        log(f"embedding {len(texts)} chunks of {size} entries once (load {_load()})")
        t0 = time.perf_counter()
        model.embed(texts)
        embed_s = time.perf_counter() - t0
        look_q = synthetic.make_queries(list(corpus.entries), queries, seed=seed * 31 + size)
        model.model.prime(look_q)
        l0 = L0Index(corpus.entries)
        for label, count in (("single", 1), (f"cluster of {nodes}", nodes)):
            log(f"starting {label} (load {_load()})")
            state = start_cluster(binary, workdir / label.replace(" ", "-"), count, ports=free_ports, timeout_s=300)
            states[label] = state
            first = state.nodes[0]
            side = settings.with_(
                weaviate_url=first.url,
                remote_grpc_port=first.grpc_port,
                collection=COLLECTION,
                replication_factor=count if count > 1 else None,
                shards=count if count > 1 else None,
                consistency=consistency if count > 1 else None,
                l1_enabled=True,
            )
            client = clients[label] = connect(side)
            store = KnowledgeStore(client, COLLECTION)
            load_before = _load()
            report = indexing.ingest(store, corpus, model)
            sides[label] = {
                "nodes": count,
                "settings": {
                    "replication_factor": side.replication_factor,
                    "shards": side.shards,
                    "consistency": side.consistency,
                },
                "ingest": {
                    "seconds": round(report.seconds, 2),
                    "entries_per_s": round(size / report.seconds, 1),
                    "chunks_per_s": round(report.chunks_embedded / report.seconds, 1),
                    "load": [load_before, _load()],
                },
                "services": LookupServices(l0=l0, embedder=model.model, store=store),
                "settings_obj": side,
                "times": [],
            }
            log(f"{label}: ingest {report.seconds:.1f} s (load {_load()})")
        labels = list(sides)
        log(f"{queries} lookups on each, alternating (load {_load()})")
        load_before = _load()
        for i, q in enumerate(look_q):
            for label in labels if i % 2 == 0 else labels[::-1]:
                s = sides[label]
                t0 = time.perf_counter()
                r = lookup_knowledge(q, s["services"], s["settings_obj"])
                s["times"].append(((time.perf_counter() - t0) * 1000, r.l1.status))
        for label in labels:
            s = sides[label]
            ms = [t for t, _ in s.pop("times")]
            s.pop("services")
            s.pop("settings_obj")
            s["lookup"] = {"p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95), "queries": len(ms), "load": [load_before, _load()]}
            s["node_rss_mb"] = node_rss_mb(states[label])
            s["pids"] = [n.pid for n in states[label].nodes]
        single, cluster = sides[labels[0]], sides[labels[1]]
        result: dict[str, Any] = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info(clients[labels[0]]),
            "seed": seed,
            "entries": size,
            "chunks": len(texts),
            "body_words": synthetic.SHORT.label,
            "embed_once_s": round(embed_s, 1),
            "sides": sides,
            "ratios": {
                "lookup_p50_cluster_over_single": round(cluster["lookup"]["p50_ms"] / single["lookup"]["p50_ms"], 3),
                "ingest_rate_cluster_over_single": round(cluster["ingest"]["chunks_per_s"] / single["ingest"]["chunks_per_s"], 3),
            },
        }
        result["machine"].update(loadavg_start=load_start, loadavg_end=[round(x, 2) for x in os.getloadavg()])
        result["elapsed_s"] = round(time.perf_counter() - started, 1)
    finally:
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.close()
        for state in states.values():
            stop_cluster(state.data_dir)
        shutil.rmtree(workdir, ignore_errors=True)
    result["table"] = render_cluster_table(result)
    return write_results(result, Path(out_dir), f"bench-cluster-{nodes}-{size}", log)


def render_cluster_table(result: dict[str, Any]) -> str:
    m, sides = result["machine"], result["sides"]
    labels = list(sides)
    lines = [
        f"Lookup Lab cluster bench, {result['date']}: {m['cpu']}, {m['cores']} cores, Weaviate {m['weaviate_server']}; "
        f"{result['entries']:,} synthetic entries ({result['body_words']} words, {result['chunks']:,} chunks, embedded once "
        f"in {result['embed_once_s']} s); load average {m['loadavg_start']} at start, {m['loadavg_end']} at end. "
        "Every node is a process of the same binary on this one machine, so the cluster shares its 2 cores.",
        "",
        "| figure | " + " | ".join(labels) + " |",
        "|---" * (len(labels) + 1) + "|",
    ]
    rows = [
        ("replication factor / shards / consistency", lambda s: " / ".join(str(v or "default") for v in s["settings"].values())),
        ("lookup p50 / p95 ms", lambda s: f"{s['lookup']['p50_ms']} / {s['lookup']['p95_ms']}"),
        ("lookup load average (start, end)", lambda s: s["lookup"]["load"]),
        (
            "ingest entries/s, chunks/s (embedding excluded)",
            lambda s: f"{s['ingest']['entries_per_s']}, {s['ingest']['chunks_per_s']}",
        ),
        ("ingest load average (start, end)", lambda s: s["ingest"]["load"]),
        (
            "node RSS MB, peak (now)",
            lambda s: ", ".join(f"{n} {v['peak_mb']} ({v['now_mb']})" for n, v in s["node_rss_mb"].items()),
        ),
    ]
    lines += [f"| {label} | " + " | ".join(str(get(sides[k])) for k in labels) + " |" for label, get in rows]
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in result["ratios"].items()]
    return "\n".join(lines)
