"""`python -m retrieval bench --cluster N`: one Weaviate node against an N-node cluster (factor N, N shards) on the same
synthetic knowledge base: lookup p50/p95 at ONE and QUORUM, ingest rate, each node's RSS. Vectors are made before either
ingest, so ingests time Weaviate's side; lookups rotate between the two, as the machine's load drifts.
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
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.engine.cluster import ClusterState, free_ports, start_cluster, stop_cluster
from retrieval.engine.server import connect, embedded_binary
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.weaviate_store import KnowledgeStore

COLLECTION = "BenchCluster"


class _Embedded:
    """The real model in front of a memo of chunk vectors: both ingests then reuse one embedding pass."""

    def __init__(self, model: Any) -> None:
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


def vector_index(store: KnowledgeStore) -> str:
    """The collection's vector index and compression as the server reports them, e.g. "hnsw, rq" (compression
    changes RSS)."""
    try:
        return f"hnsw, {store.compression()}"
    except Exception as exc:  # a figure's label: the bench goes on without it
        return f"unknown ({exc})"


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
    vectors: str = "real",
    consistencies: tuple[str, ...] = ("ONE", "QUORUM"),
) -> dict[str, Any]:
    """One node against `nodes` nodes at `size` entries of one short body each: the cluster ingested at the settings'
    consistency (QUORUM when unset) and searched at each of `consistencies`; writes the figures to `out_dir`."""
    log = log or (lambda m: None)
    if nodes < 2 or size < 1 or queries < 1:
        raise ValueError(f"--cluster {nodes} must be at least 2, the size ({size}) and --queries ({queries}) at least 1")
    if vectors not in ("real", "synthetic"):
        raise ValueError(f"--vectors {vectors!r}: real or synthetic")
    started, load_start = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
    seed = int(time.time()) % 100_000 if seed is None else seed
    workdir = Path(tempfile.mkdtemp(prefix="lookup-bench-cluster-"))
    binary = embedded_binary(settings)
    consistency = settings.consistency or "QUORUM"
    levels = list(dict.fromkeys([*(c.upper() for c in consistencies), consistency]))
    sides: dict[str, dict[str, Any]] = {}
    runs: list[tuple[str, str | None, LookupServices, Settings]] = []  # (side, consistency, services, settings)
    clients: dict[str, Any] = {}
    states: dict[str, ClusterState] = {}
    try:
        corpus = synthetic.make_corpus(size, seed=seed + size, body=synthetic.SHORT)
        embedder = Embedder(settings.embedding_model, model_dir=settings.model_dir)
        synth = None
        if vectors == "synthetic":
            from retrieval.bench.vectors import SyntheticVectors

            synth = SyntheticVectors(embedder, seed=seed)
            log(synth.describe())
        model = _Embedded(synth or embedder)
        texts = [c.text for e in corpus.entries for c in chunk_entry(e, model.tokenizer, model.max_tokens)]
        log(f"making the vectors of {len(texts)} chunks of {size} entries once ({vectors}; load {_load()})")
        t0 = time.perf_counter()
        model.embed(texts)
        embed_s = time.perf_counter() - t0
        look_q = synthetic.make_queries(list(corpus.entries), queries, seed=seed * 31 + size)
        embedder.prime(look_q)  # query vectors from the model, cached before any lookup is timed
        l0 = L0Index(corpus.entries)
        for label, count in (("single", 1), (f"cluster of {nodes}", nodes)):
            log(f"starting {label} (load {_load()})")
            state = start_cluster(binary, workdir / label.replace(" ", "-"), count, ports=free_ports, timeout_s=300)
            states[label] = state
            side = _side_settings(settings, state, count, consistency)
            client = clients[label] = connect(side)
            sides[label], side_runs = _ingest_side(label, count, side, client, state, corpus, model, l0, embedder, levels, log)
            runs.extend(side_runs)
        labels = list(sides)
        log(f"{queries} lookups on each of {len(runs)} (single, cluster at {', '.join(levels)}), rotating (load {_load()})")
        load_before = _load()
        times, statuses = _rotating_lookups(runs, look_q)
        load = [load_before, _load()]
        for label in labels:
            _lookup_figures(sides[label], label, times, statuses, load, consistency)
            sides[label]["node_rss_mb"] = node_rss_mb(states[label])
            _rss_totals(sides[label])
            sides[label]["pids"] = [n.pid for n in states[label].nodes]
        machine = machine_info(clients[labels[0]])
        result = _cluster_result(sides, labels, machine, seed=seed, size=size, chunks=len(texts), synth=synth, embed_s=embed_s)
        result["ingest_consistency"] = consistency
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
    name = f"bench-cluster-{nodes}-{size}" + ("" if vectors == "real" else "-synthetic-vectors")
    return write_results(result, Path(out_dir), name, log)


def _side_settings(settings: Settings, state: ClusterState, count: int, consistency: str) -> Settings:
    """The settings of one side: its first node's URL, and for a cluster one replica and shard per node."""
    first = state.nodes[0]
    return settings.with_(
        weaviate_url=first.url,
        remote_grpc_port=first.grpc_port,
        collection=COLLECTION,
        replication_factor=count if count > 1 else None,
        shards=count if count > 1 else None,
        consistency=consistency if count > 1 else None,
        l1_enabled=True,
    )


def _ingest_side(
    label: str,
    count: int,
    side: Settings,
    client: Any,
    state: ClusterState,
    corpus: Any,
    model: Any,
    l0: L0Index,
    embedder: Embedder,
    levels: list[str],
    log: Callable[[str], None],
) -> tuple[dict[str, Any], list[tuple[str, str | None, LookupServices, Settings]]]:
    """One side ingested: its figures so far, and one (side, consistency, services, settings) per level it is searched at."""
    store = knowledge_store(client, side, embedding_model="")  # the bench's own vectors: no model check
    load_before = _load()
    report = indexing.ingest(store, corpus, model)
    figures = {
        "nodes": count,
        "settings": {"replication_factor": side.replication_factor, "shards": side.shards, "consistency": side.consistency},
        "ingest": {
            "seconds": round(report.seconds, 2),
            "entries_per_s": round(len(corpus.entries) / report.seconds, 1),
            "chunks_per_s": round(report.chunks_embedded / report.seconds, 1),
            "load": [load_before, _load()],
        },
        "node_rss_mb_after_ingest": node_rss_mb(state),
        "vector_index": vector_index(store),
    }
    runs: list[tuple[str, str | None, LookupServices, Settings]] = []
    for level in levels if count > 1 else [None]:  # the single node has no levels
        lstore = knowledge_store(client, side.with_(consistency=level), embedding_model="") if level else store
        runs.append((label, level, LookupServices(l0=l0, embedder=embedder, store=lstore), side.with_(consistency=level)))
    log(f"{label}: ingest {report.seconds:.1f} s (load {_load()})")
    return figures, runs


def _rotating_lookups(
    runs: list[tuple[str, str | None, LookupServices, Settings]], queries: list[str]
) -> tuple[dict[tuple[str, str | None], list[float]], dict[tuple[str, str | None], dict[str, int]]]:
    """Each query on every (side, level) in turn, the order rotating by query: the time and L1 status of each."""
    times: dict[tuple[str, str | None], list[float]] = {(label, level): [] for label, level, _, _ in runs}
    statuses: dict[tuple[str, str | None], dict[str, int]] = {key: {} for key in times}
    for i, q in enumerate(queries):
        for label, level, services, side_settings in runs[i % len(runs) :] + runs[: i % len(runs)]:
            t0 = time.perf_counter()
            r = lookup_knowledge(q, services, side_settings.options())
            times[label, level].append((time.perf_counter() - t0) * 1000)
            statuses[label, level][r.l1.status.value] = statuses[label, level].get(r.l1.status.value, 0) + 1
    return times, statuses


def _lookup_figures(
    side: dict[str, Any],
    label: str,
    times: dict[tuple[str, str | None], list[float]],
    statuses: dict[tuple[str, str | None], dict[str, int]],
    load: list[Any],
    consistency: str,
) -> None:
    figures = {
        level: {
            "p50_ms": pct(ms, 50),
            "p95_ms": pct(ms, 95),
            "queries": len(ms),
            "l1_status": statuses[label, level],
            "load": load,
        }
        for (lab, level), ms in times.items()
        if lab == label
    }
    if side["nodes"] > 1:
        side["lookup_by_consistency"] = figures
        side["lookup"] = figures[consistency]
    else:
        side["lookup"] = figures[None]


def _rss_totals(side: dict[str, Any]) -> None:
    side["rss_total_mb"] = {
        when: {k: round(sum(v[k] for v in side[key].values()), 1) for k in ("peak_mb", "now_mb")}
        for when, key in (("after_ingest", "node_rss_mb_after_ingest"), ("after_lookups", "node_rss_mb"))
    }


def _cluster_result(
    sides: dict[str, dict[str, Any]],
    labels: list[str],
    machine: dict[str, Any],
    *,
    seed: int,
    size: int,
    chunks: int,
    synth: Any,
    embed_s: float,
) -> dict[str, Any]:
    single, cluster = sides[labels[0]], sides[labels[1]]
    p50 = single["lookup"]["p50_ms"]
    after = "after_lookups"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "seed": seed,
        "entries": size,
        "chunks": chunks,
        "body_words": synthetic.SHORT.label,
        "corpus_vectors": "real" if synth is None else synth.describe(),
        "query_vectors": "the model's, embedded before timing",
        "embed_once_s": round(embed_s, 1),
        "sides": sides,
        "ratios": {
            "lookup_p50_cluster_over_single": round(cluster["lookup"]["p50_ms"] / p50, 3),
            **{
                f"lookup_p50_cluster_{level}_over_single": round(f["p50_ms"] / p50, 3)
                for level, f in cluster["lookup_by_consistency"].items()
            },
            "ingest_rate_cluster_over_single": round(cluster["ingest"]["chunks_per_s"] / single["ingest"]["chunks_per_s"], 3),
            "rss_peak_total_cluster_over_single": round(
                cluster["rss_total_mb"][after]["peak_mb"] / single["rss_total_mb"][after]["peak_mb"], 3
            ),
        },
    }


def render_cluster_table(result: dict[str, Any]) -> str:
    m, sides = result["machine"], result["sides"]
    labels = list(sides)
    single = sides[labels[0]]
    vectors = result.get("corpus_vectors", "real")
    made = "embedded once" if vectors == "real" else "SYNTHETIC vectors (bench.vectors) made once"
    lines = [
        f"Lookup Lab cluster bench, {result['date']}: {m['cpu']}, {m['cores']} cores, Weaviate {m['weaviate_server']}; "
        f"{result['entries']:,} synthetic entries ({result['body_words']} words, {result['chunks']:,} chunks, {made} "
        f"in {result['embed_once_s']} s; query vectors from the model); load average {m['loadavg_start']} at start, "
        f"{m['loadavg_end']} at end. Every node is a process of the same binary on this one machine, so the cluster "
        "shares its cores. Lookups rotate query by query between the single node and the cluster at each level.",
        "",
        "| figure | " + " | ".join(labels) + " |",
        "|---" * (len(labels) + 1) + "|",
    ]

    def rss(key: str) -> Callable[[dict[str, Any]], str]:
        return lambda s: ", ".join(f"{n} {v['peak_mb']} ({v['now_mb']})" for n, v in s.get(key, {}).items())

    def at(level: str) -> Callable[[dict[str, Any]], str]:
        def cell(s: dict[str, Any]) -> str:
            f = s.get("lookup_by_consistency", {}).get(level)
            if f is None:
                return "- (one replica)"
            return f"{f['p50_ms']} / {f['p95_ms']} ({f['p50_ms'] / single['lookup']['p50_ms']:.2f}x)"

        return cell

    levels = list(next((s["lookup_by_consistency"] for s in sides.values() if "lookup_by_consistency" in s), {}))
    rows = [
        ("replication factor / shards / consistency", lambda s: " / ".join(str(v or "default") for v in s["settings"].values())),
        ("vector index", lambda s: s.get("vector_index", "not recorded")),
        ("lookup p50 / p95 ms", lambda s: f"{s['lookup']['p50_ms']} / {s['lookup']['p95_ms']}"),
        *((f"lookup p50 / p95 ms at {level} (p50 over one node)", at(level)) for level in levels),
        ("lookup load average (start, end)", lambda s: s["lookup"]["load"]),
        (
            "ingest s, entries/s, chunks/s (vectors made before)",
            lambda s: f"{s['ingest']['seconds']}, {s['ingest']['entries_per_s']}, {s['ingest']['chunks_per_s']}",
        ),
        ("ingest load average (start, end)", lambda s: s["ingest"]["load"]),
        ("node RSS MB after ingest, peak (now)", rss("node_rss_mb_after_ingest")),
        ("node RSS MB after lookups, peak (now)", rss("node_rss_mb")),
        (
            "total RSS MB after lookups, peak (now)",
            lambda s: "{peak_mb} ({now_mb})".format(**s["rss_total_mb"]["after_lookups"]) if "rss_total_mb" in s else "",
        ),
    ]
    lines += [f"| {label} | " + " | ".join(str(get(sides[k])) for k in labels) + " |" for label, get in rows]
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in result["ratios"].items()]
    return "\n".join(lines)
