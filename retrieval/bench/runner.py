"""`python -m retrieval bench`: where lookup time goes, and how each cost grows with the knowledge base.
Each goal is a ratio of two things measured side by side in one run, since absolute times drift on a noisy machine.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

from weaviate.classes.query import MetadataQuery

from retrieval.bench import synthetic
from retrieval.bench.common import dir_mb, listening_pid, machine_info, paired_l1, pct, wait_for_quiet, write_results
from retrieval.bench.explain import bench_explain
from retrieval.bench.floors import embedding_floor, ingest_floor
from retrieval.bench.report import STAGES, ratios_and_goals, render_table
from retrieval.bench.store import bench_invocation_store
from retrieval.config import Settings, db_budget
from retrieval.core.chunking import chunk_entry
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import candidate_depth
from retrieval.engine.ports import free_port
from retrieval.engine.server import connect
from retrieval.errors import BenchStopped
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.store.search_query import entry_groups
from retrieval.store.weaviate_store import KnowledgeStore
from retrieval.types.modes import LookupMode

RAW_BATCH = 64  # chunks per raw-embedding call: ingest embeds 64 entries' chunks at a time
RECALL_K = 10  # filtered recall against the exact ranking is measured at this depth at least
RECALL_DOMAINS = 3  # filtered recall is measured in the first three domains ...
RECALL_PER_DOMAIN = 100  # ... with up to 100 queries each: with 25, one query that found little moved the figure by 0.012
QUIET_MAX_S = 180.0  # longest wait for the server to go quiet after an ingest (it took about 2 min at 100k)
L0_PASSES = 5  # times over the queries when L0 of the smallest and the largest size are timed side by side


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def peak_rss_mb() -> float:
    """This process's peak resident set (ru_maxrss is in KiB on Linux); it includes the embedding model."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _server_pid(client, url: str | None = None) -> int | None:
    """The pid of the embedded Weaviate server we started, or of the one at `url` when it listens on this
    machine (None otherwise)."""
    db = getattr(getattr(client, "_connection", None), "embedded_db", None)  # weaviate-client internals
    pid = getattr(getattr(db, "process", None), "pid", None)
    if pid is None and url:
        parsed = urlparse(url)
        if parsed.hostname in ("127.0.0.1", "localhost") and parsed.port:
            pid = listening_pid(parsed.port)
    return pid


def _server_rss_mb(pid: int | None) -> dict[str, float] | None:
    """Peak and current RSS of the Weaviate server process `pid` (None: not on this machine)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text() if pid else ""
    except OSError:
        return None
    fields = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith(("VmHWM", "VmRSS"))}
    return {"peak_mb": round(fields["VmHWM"] / 1024, 1), "now_mb": round(fields["VmRSS"] / 1024, 1)} if fields else None


def grouped_bare(store: KnowledgeStore, vector: list[float], k: int) -> Any:
    """The lookup's vector query returning nothing but distances: `k` entries grouped from k * the store's fold factor
    chunk hits, as deep as the lookup asks Weaviate (KnowledgeStore.search); the floor asks for k chunk hits."""
    return store.collection.query.near_vector(
        near_vector=vector,
        limit=k * store.fold_factor,
        return_properties=[],
        return_metadata=MetadataQuery(distance=True),
        group_by=entry_groups(k),
    )


def _floor_query(
    store: KnowledgeStore, embedder: Embedder, query: str, k: int, mode: LookupMode = LookupMode.NEAR_VECTOR
) -> tuple[float, float, float]:
    """One query embedding plus the bare Weaviate queries of the lookup's `mode`, `k` deep (the lookup's candidate depth):
    (embed ms, queries ms, ms of the lookup's own vector query bare (grouped_bare), outside the floor)."""
    from retrieval.store.collection_schema import LEXICAL_FIELDS

    q = store.collection.query
    t0 = time.perf_counter()
    vec = list(map(float, embedder.embed_query(query)))
    t1 = time.perf_counter()
    if mode is LookupMode.HYBRID:
        q.hybrid(query=query, vector=vec, limit=k, query_properties=list(LEXICAL_FIELDS), return_properties=[])
    else:
        q.near_vector(near_vector=vec, limit=k, return_properties=[], return_metadata=MetadataQuery(distance=True))
        if mode is LookupMode.FUSION:
            q.bm25(query=query, query_properties=list(LEXICAL_FIELDS), limit=k, return_properties=[])
    t2 = time.perf_counter()
    grouped_bare(store, vec, k)
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (time.perf_counter() - t2) * 1000


MEMORY_SHARE = 0.8  # a size whose Weaviate would need more than this share of the machine's memory is not run
# A projection needs a measured size this large: below it Weaviate's fixed costs (its caches, the Go runtime) make
# the memory per chunk look far larger than it is (70.7 KB per chunk from 1,000 entries, 9.2 KB from 100,000).
PROJECTION_MIN_CHUNKS = 100_000


def memory_stop(
    n: int, figures: dict[int, dict[str, Any]], baseline: dict[str, float] | None, memory_gib: float | None, body: str
) -> dict[str, Any] | None:
    """Why size `n` cannot run on this machine, or None: Weaviate's memory for it, projected per chunk from the sizes run
    so far (none before one of PROJECTION_MIN_CHUNKS; MemoryGuard stops a size that outgrows memory while it runs)."""
    done = [(m, f) for m, f in sorted(figures.items()) if (f.get("weaviate_rss_mb") or {}).get("now_mb")]
    if not done or not baseline or not memory_gib or max(f["ingest"]["chunks"] for _, f in done) < PROJECTION_MIN_CHUNKS:
        return None
    chunks_so_far = sum(f["ingest"]["chunks"] for _, f in done)
    now = done[-1][1]["weaviate_rss_mb"]["now_mb"]
    per_chunk_mb = max(now - baseline["now_mb"], 0.0) / max(chunks_so_far, 1)
    alike = [f for _, f in done if f["body_words"] == body] or [done[-1][1]]
    chunks = alike[-1]["chunks_per_entry"] * n
    projected = now + per_chunk_mb * chunks
    limit = MEMORY_SHARE * memory_gib * 1024
    if projected <= limit:
        return None
    return {
        "size": n,
        "projected_weaviate_mb": round(projected),
        "limit_mb": round(limit),
        "why": (
            f"{n:,} entries stop here: Weaviate would need about {projected / 1024:.1f} GB ({per_chunk_mb * 1024:.1f} KB "
            f"per chunk measured up to {done[-1][0]:,} entries, {alike[-1]['chunks_per_entry']} chunks per entry), more "
            f"than {MEMORY_SHARE:.0%} of this machine's {memory_gib} GiB"
        ),
    }


class MemoryGuard:
    """Stops an ingest, between batches, whose Weaviate (`pid`) holds more than `limit_mb`, or whose growth, once
    `project_after` of the entries are in, would reach it: raises BenchStopped saying how far it got and what it needed."""

    def __init__(self, pid: int | None, limit_mb: float | None, *, project_after: float = 0.1) -> None:
        self.pid, self.limit_mb, self.project_after = pid, limit_mb, project_after
        self._start_mb: float | None = None

    def start(self) -> None:
        """A size begins: its growth is counted from the server's memory now."""
        self._start_mb = (_server_rss_mb(self.pid) or {}).get("now_mb")

    def check(self, entries: int, done: int) -> None:
        rss = (_server_rss_mb(self.pid) or {}).get("now_mb")
        if rss is None or self.limit_mb is None:
            return
        share = f"more than {MEMORY_SHARE:.0%} of this machine's memory ({self.limit_mb / 1024:.1f} GB)"
        held = f"{entries:,} entries stopped during the ingest: after {done:,} of them Weaviate held {rss / 1024:.1f} GB"
        if rss > self.limit_mb:
            raise BenchStopped(f"{held}, {share}")
        if self._start_mb is None or done <= 0 or done < self.project_after * entries:
            return
        projected = self._start_mb + (rss - self._start_mb) * entries / done
        if projected > self.limit_mb:
            raise BenchStopped(
                f"{held}, {(rss - self._start_mb) / done * 1000:.0f} MB more per 1,000 entries since the size began: "
                f"all of them would need about {projected / 1024:.1f} GB, {share}"
            )


def bench_ingest(
    store: KnowledgeStore, corpus, embedder: Embedder, *, raw_sample_chunks: int, guard: MemoryGuard | None = None
) -> dict[str, Any]:
    """Ingest, with the embedder's raw rate measured between batches on an even sample of the same chunks (batches of at
    least RAW_BATCH, like ingest's); then the ingest's floors on the same chunks (bench_floors)."""
    chunk_lists = [[c.text for c in chunk_entry(e, embedder.tokenizer, embedder.max_tokens)] for e in corpus.entries]
    total_chunks = sum(len(c) for c in chunk_lists)
    stride = max(1, round(total_chunks / raw_sample_chunks))
    state: dict[str, Any] = {"prev": 0, "seen": 0, "raw_s": 0.0, "raw_n": 0, "cb_s": 0.0, "pending": []}

    def between_batches(stage: str, done: int, total: int) -> None:
        t0 = time.perf_counter()
        if guard is not None:
            guard.check(total, done)
        for chunks in chunk_lists[state["prev"] : done]:
            for text in chunks:
                if state["seen"] % stride == 0:
                    state["pending"].append(text)
                state["seen"] += 1
        state["prev"] = done
        texts = state["pending"]
        if len(texts) >= RAW_BATCH or (done == total and texts):
            t1 = time.perf_counter()
            embedder.embed(texts)
            state["raw_s"] += time.perf_counter() - t1
            state["raw_n"] += len(texts)
            state["pending"] = []
        state["cb_s"] += time.perf_counter() - t0

    if guard is not None:
        guard.start()
    report = indexing.ingest(store, corpus, embedder, progress=between_batches)
    seconds = report.seconds - state["cb_s"]  # the raw measurement ran inside ingest's clock
    raw_rate = state["raw_n"] / state["raw_s"] if state["raw_s"] else None
    rate = report.chunks_embedded / seconds
    t0 = time.perf_counter()
    again = indexing.ingest(store, corpus, embedder)
    reingest_s = time.perf_counter() - t0
    # the floors, on the same chunks: Weaviate's bare insert of the stored chunks, the model's best way to embed them
    floor = ingest_floor(store, f"{store.name}_Floor")
    weaviate_s = max(seconds - report.embed_seconds, 1e-9)  # the ingest's own time outside the model
    weaviate_rate = report.chunks_embedded / weaviate_s
    sample = [text for chunks in chunk_lists for text in chunks][::stride][: max(raw_sample_chunks, 1)]
    embed_floor = embedding_floor(embedder, sample) if isinstance(embedder, Embedder) and sample else None
    embed_rate = report.chunks_embedded / report.embed_seconds if report.embed_seconds else None
    return {
        "floor": floor,
        "weaviate_chunks_per_s": round(weaviate_rate, 2),
        "over_floor": round(weaviate_rate / floor["objects_per_s"], 3) if floor["objects_per_s"] else None,
        "embed_floor": embed_floor,
        "embed_chunks_per_s": None if embed_rate is None else round(embed_rate, 2),
        "embed_over_floor": (
            round(embed_rate / embed_floor["chunks_per_s"], 3) if embed_floor and embed_rate is not None else None
        ),
        "chunks": total_chunks,
        "seconds": round(seconds, 2),
        "entries_per_s": round(len(corpus.entries) / seconds, 2),
        "chunks_per_s": round(rate, 2),
        "embed_share": round(report.embed_seconds / seconds, 3),
        "raw_chunks_per_s": None if raw_rate is None else round(raw_rate, 2),
        "raw_sample_chunks": state["raw_n"],
        "over_raw": None if raw_rate is None else round(rate / raw_rate, 3),
        "reingest": {
            "seconds": round(reingest_s, 2),
            "chunks_embedded": again.chunks_embedded,
            "unchanged": again.unchanged,
        },
    }


def bench_lookups(
    services: LookupServices,
    settings: Settings,
    queries: list[str],
    floor_queries: list[str],
    categories: list[str],
    cached_n: int,
) -> dict[str, Any]:
    """Lookups, the floor and filtered/unfiltered L1, each pair interleaved query by query, order alternating."""
    if services.store is None or services.embedder is None:
        raise ValueError("bench_lookups needs the L1 store and the embedder")
    store, embedder = services.store, services.embedder
    wall: list[float] = []
    floor: list[float] = []
    f_embed: list[float] = []
    f_nv: list[float] = []
    f_grouped: list[float] = []
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    filtered_n = 0

    def do_lookup(q: str) -> None:
        nonlocal filtered_n
        t0 = time.perf_counter()
        r = lookup_knowledge(q, services, settings.options())
        wall.append((time.perf_counter() - t0) * 1000)
        for s in STAGES:
            stages[s].append(r.timings_ms.get(s, 0.0))
        filtered_n += r.l1.category is not None

    def do_floor(fq: str) -> None:
        e, n, grouped = _floor_query(store, embedder, fq, candidate_depth(settings.options()), settings.search_mode)
        f_embed.append(e)
        f_nv.append(n)
        f_grouped.append(grouped)
        floor.append(e + n)

    # strict=False: an odd number of generated queries leaves the last lookup without a floor partner
    for i, (q, fq) in enumerate(zip(queries, floor_queries, strict=False)):
        if i % 2 == 0:
            do_lookup(q)
            do_floor(fq)
        else:
            do_floor(fq)
            do_lookup(q)
    cached = []
    for q in queries[:cached_n]:  # the same texts again: the query embedding now comes from the cache
        t0 = time.perf_counter()
        lookup_knowledge(q, services, settings.options())
        cached.append((time.perf_counter() - t0) * 1000)
    vectors = [embedder.embed_query(q) for q in queries]  # cached by now: only L1 is timed
    unf, fil, _, _ = paired_l1(store, vectors, categories, k=settings.top_k)
    return {
        "lookup": {
            "p50_ms": pct(wall, 50),
            "p95_ms": pct(wall, 95),
            "cached_p50_ms": pct(cached, 50),
            "stages_p50_ms": {s: pct(v, 50) for s, v in stages.items()},
            "stages_p95_ms": {s: pct(v, 95) for s, v in stages.items()},
            "filtered_share": round(filtered_n / max(len(queries), 1), 3),
            "queries": len(queries),
        },
        "floor": {
            "p50_ms": pct(floor, 50),
            "p95_ms": pct(floor, 95),
            "embed_p50_ms": pct(f_embed, 50),
            "near_vector_p50_ms": pct(f_nv, 50),
            "grouped_bare_p50_ms": pct(f_grouped, 50),
        },
        "l1": {
            "unfiltered_p50_ms": pct(unf, 50),
            "filtered_p50_ms": pct(fil, 50),
            "unfiltered_p95_ms": pct(unf, 95),
            "filtered_p95_ms": pct(fil, 95),
        },
    }


def bench_size(
    n: int,
    *,
    client,
    embedder: Embedder,
    recorder: InvocationStore,
    settings: Settings,
    seed: int,
    queries: int,
    body: synthetic.BodyPolicy,
    raw_sample_chunks: int,
    run_id: str,
    log: Callable[[str], None],
    vectors: Any = None,
    server_pid: int | None = None,
    keep_l0: dict[int, tuple[L0Index, list[str]]] | None = None,
    quiet_max_s: float = QUIET_MAX_S,
    where: Settings | None = None,
    guard: MemoryGuard | None = None,
) -> dict[str, Any]:
    """One size, timed once the Weaviate server (`server_pid`) is quiet after the ingest; with synthetic `vectors`, filtered
    L1 is also timed under each filter strategy. `keep_l0[n]` gets the L0 index and queries, for paired_l0_growth."""
    t0 = time.perf_counter()
    corpus = synthetic.make_corpus(n, seed=seed + n, body=body)
    out: dict[str, Any] = {"entries": n, "body_words": body.label, "generate_s": round(time.perf_counter() - t0, 2)}
    load = out["loadavg"] = {"start": _load1()}
    # the bench's own collection, of the server `where` names (default: `settings`); its vectors are no model's when synthetic
    model = "" if vectors is not None else None
    store = knowledge_store(client, where or settings, collection=f"Bench_{n}_{run_id}", embedding_model=model)
    store.drop()
    server_dir = None if (where or settings).weaviate_url else (where or settings).weaviate_data_dir
    disk_before = dir_mb(server_dir)
    log(f"[{n}] ingest ({body.label} words per body)")
    out["ingest"] = bench_ingest(store, corpus, vectors or embedder, raw_sample_chunks=raw_sample_chunks, guard=guard)
    load["ingest"] = _load1()
    out["chunks_per_entry"] = round(out["ingest"]["chunks"] / n, 2)
    t0 = time.perf_counter()
    l0 = L0Index(corpus.entries)
    out["l0"] = {"build_s": round(time.perf_counter() - t0, 3), "patterns": l0.pattern_count}
    entries = list(corpus.entries)
    all_q = synthetic.make_queries(entries, 2 * queries, seed=seed * 31 + n)
    look_q, floor_q = all_q[0::2], all_q[1::2]
    if keep_l0 is not None:
        keep_l0[n] = (l0, look_q)
    out["server_quiet"] = wait_for_quiet(server_pid, max_s=quiet_max_s)
    disk_after = dir_mb(server_dir)  # the size's collection and partition on disk, flushed once the server is quiet
    out["weaviate_disk_mb"] = None if disk_after is None or disk_before is None else round(disk_after - disk_before, 1)
    log(f"[{n}] Weaviate quiet after {out['server_quiet']['waited_s']} s (CPU share {out['server_quiet']['cpu_share']})")
    out["l0"].update(_l0_figures(l0, look_q))
    load["l0"] = _load1()
    log(f"[{n}] {len(look_q)} lookups against the floor, and filtered against unfiltered L1")
    services = LookupServices(l0=l0, embedder=embedder, store=store, recorder=recorder)
    out.update(
        bench_lookups(
            services,
            settings.with_(session_tag=f"bench-{n}"),
            look_q,
            floor_q,
            sorted(synthetic.DOMAINS),
            cached_n=min(len(look_q), 50),
        )
    )
    out["lookup"]["fold_factor"] = store.fold_factor  # chunk hits L1 fetched per wanted entry
    load["lookups"] = _load1()
    log(f"[{n}] entries explained (the trace, what it would take) beside the lookup")
    out["explain"] = bench_explain(services, settings.options(), look_q, seed=seed + n)
    if vectors is not None:
        _filtered_figures(out, store, corpus, vectors, embedder, look_q, all_q, settings.top_k, log)
        load["l1"] = _load1()
    out["peak_rss_mb"] = peak_rss_mb()
    out["weaviate_rss_mb"] = _server_rss_mb(server_pid)
    return out


def paired_l0_growth(
    small: tuple[L0Index, list[str]], big: tuple[L0Index, list[str]], *, passes: int = L0_PASSES
) -> dict[str, Any]:
    """L0 of the smallest and of the largest size timed side by side: each query of one, then the query of the
    same number of the other (which goes first alternates), `passes` times over. Both see the same moment of a
    noisy machine, as every other goal's pair does; each size's own loop in bench_size ran minutes apart."""
    times: tuple[list[float], list[float]] = ([], [])
    sides = (small, big)
    for p in range(passes):
        for i, pair in enumerate(zip(small[1], big[1], strict=False)):
            for side in (0, 1) if (i + p) % 2 == 0 else (1, 0):
                t0 = time.perf_counter()
                sides[side][0].match(pair[side])
                times[side].append((time.perf_counter() - t0) * 1000)
    s50, b50 = pct(times[0], 50), pct(times[1], 50)
    return {
        "small_p50_ms": s50,
        "small_p95_ms": pct(times[0], 95),
        "big_p50_ms": b50,
        "big_p95_ms": pct(times[1], 95),
        "growth": round(b50 / s50, 3) if s50 and b50 is not None else None,
        "passes": passes,
        "queries": len(times[0]) // max(passes, 1),
        "loadavg": _load1(),
    }


def _exit_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into SystemExit while the bench runs, so that clean-up (the embedded server) still happens."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, leave)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _cli_figure(settings: Settings, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """bench_cli_lookup's figures, or why there are none (no Weaviate binary here, or a run that failed)."""
    from retrieval.bench.cli_lookup import cli_lookup_figures
    from retrieval.engine.server import embedded_binary
    from retrieval.errors import LookupLabError

    if not embedded_binary(settings).is_file():
        return {"warm_s": None, "why": f"no Weaviate binary at {embedded_binary(settings)} (scripts/setup.sh builds it)"}
    try:
        return cli_lookup_figures(settings, workdir, log=log)
    except (LookupLabError, RuntimeError, OSError) as exc:
        log(f"cli: no figure: {exc}")
        return {"warm_s": None, "why": str(exc)}


def run_bench(
    settings: Settings,
    *,
    sizes: list[int],
    queries: int = 200,
    out_dir: Path = Path("bench/results"),
    log: Callable[[str], None] | None = None,
    client=None,
    embedder: Embedder | None = None,
    invocation_rows: int = 1_000_000,
    seed: int | None = None,
    full_bodies_up_to: int = 2000,
    raw_sample_chunks: int = 1500,
    vectors: str = "real",
    embed_queries: int = 60,
    app: bool = True,
    app_entries: int | None = None,
    cli: bool = True,
    quiet_max_s: float = QUIET_MAX_S,
) -> dict[str, Any]:
    """Every measurement of docs/benchmarks.md at each of `sizes` (its own collection, dropped at the end), and once a
    run the model, the app (`app`), the CLI lookup (`cli`) and the invocation store; writes `<date>-bench.md` and
    `.json` to `out_dir` and returns the figures. Without `client` an embedded Weaviate is started here."""
    log = log or (lambda m: None)
    sizes = sorted(set(sizes))
    _check_run(sizes, queries, vectors, embed_queries)
    started = time.perf_counter()
    seed = int(time.time()) % 100_000 if seed is None else seed
    run_id = f"{seed:05d}"
    workdir = Path(tempfile.mkdtemp(prefix="lookup-bench-"))
    own_client = client is None
    settings = settings.with_(l1_enabled=True)  # the lookup's own mode; the floor makes that mode's bare queries
    recorder = None
    names: list[str] = []
    restore_sigterm = _exit_on_sigterm()
    try:
        where, client, embedder, model = _open_services(settings, client, embedder, workdir, embed_queries, seed, log)
        synth = _synthetic_vectors(embedder, seed, log) if vectors == "synthetic" else None
        machine = machine_info(client)
        recorder = InvocationStore(workdir / "invocations.duckdb", budget=db_budget(settings))
        recorder.start_background_flush()
        run = _SizeRun(client, embedder, recorder, settings, where, seed, queries, raw_sample_chunks, run_id, synth, quiet_max_s)
        figures, stopped, keep_l0 = _run_sizes(run, sizes, names, machine, full_bodies_up_to, log)
        sizes = [n for n in sizes if n in figures]  # the sizes run (a size that cannot fit stops the run)
        l0_paired = _paired_l0(sizes, keep_l0, log)
        kb_peak = peak_rss_mb()
        extras = {"app": app, "app_entries": app_entries, "cli": cli, "invocation_rows": invocation_rows}
        app_fig, cli_fig, store_fig = _beside_sizes(run, workdir, extras, log)
        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        parts = {"app": app_fig, "cli": cli_fig, "store": store_fig, "l0_paired": l0_paired, "stopped": stopped}
        result = _result(figures, parts, machine, model, synth, seed=seed, queries=queries, kb_peak=kb_peak, started=started)
    finally:
        if recorder is not None:
            recorder.close()
        for name in names if client is not None else ():
            with contextlib.suppress(Exception):  # clean-up must not hide the run's own error
                knowledge_store(client, where, collection=name, embedding_model="").drop()
        if own_client and client is not None:
            client.close()  # stops the embedded server we started
        shutil.rmtree(workdir, ignore_errors=True)
        restore_sigterm()
    result["table"] = render_table(result)
    name = f"bench-{'-'.join(map(str, sizes))}" + ("" if synth is None else "-synthetic-vectors")
    return write_results(result, Path(out_dir), name, log)


def _check_run(sizes: list[int], queries: int, vectors: str, embed_queries: int) -> None:
    if not sizes or min(sizes) < 1 or queries < 1:
        raise ValueError("bench needs at least one size >= 1 and queries >= 1")
    if vectors not in ("real", "synthetic"):
        raise ValueError(f"--vectors {vectors!r}: real or synthetic")
    if embed_queries < 50:
        raise ValueError(f"embed_queries {embed_queries}: at least 50 queries make a p95")


def _synthetic_vectors(embedder: Embedder, seed: int, log: Callable[[str], None]) -> Any:
    from retrieval.bench.vectors import SyntheticVectors

    log("embedding the templates of the synthetic corpus vectors")
    synth = SyntheticVectors(embedder, seed=seed)
    log(synth.describe())
    return synth


@dataclass(frozen=True)
class _SizeRun:
    """What every size of one bench run shares."""

    client: Any
    embedder: Embedder
    recorder: InvocationStore
    settings: Settings
    where: Settings
    seed: int
    queries: int
    raw_sample_chunks: int
    run_id: str
    vectors: Any
    quiet_max_s: float


def _run_sizes(
    run: _SizeRun, sizes: list[int], names: list[str], machine: dict[str, Any], full_bodies_up_to: int, log: Callable[[str], None]
) -> tuple[dict[int, dict[str, Any]], dict[str, Any] | None, dict[int, tuple[L0Index, list[str]]]]:
    """Each size in turn, smallest first, until one would not fit in memory (or outgrows it while it runs): the
    figures per size, why the run stopped (None), and the L0 indexes of the smallest and largest sizes."""
    figures: dict[int, dict[str, Any]] = {}
    server_pid = _server_pid(run.client, run.settings.weaviate_url)
    keep_l0: dict[int, tuple[L0Index, list[str]]] = {}
    baseline = _server_rss_mb(server_pid)
    memory_gib = machine.get("memory_gib")
    guard = MemoryGuard(server_pid, MEMORY_SHARE * memory_gib * 1024 if memory_gib else None)
    for n in sizes:
        body = synthetic.FULL if n <= full_bodies_up_to else synthetic.SHORT
        stopped = memory_stop(n, figures, baseline, memory_gib, body.label)
        if stopped:
            log(f"[{n}] not run: {stopped['why']}")
            return figures, stopped, keep_l0
        names.append(f"Bench_{n}_{run.run_id}")
        try:
            figures[n] = bench_size(
                n,
                client=run.client,
                embedder=run.embedder,
                recorder=run.recorder,
                settings=run.settings,
                seed=run.seed,
                queries=run.queries,
                body=body,
                raw_sample_chunks=run.raw_sample_chunks,
                run_id=run.run_id,
                log=log,
                vectors=run.vectors,
                server_pid=server_pid,
                quiet_max_s=run.quiet_max_s,
                keep_l0=keep_l0 if n in (sizes[0], sizes[-1]) else None,
                where=run.where,
                guard=guard,
            )
        except BenchStopped as exc:
            log(f"[{n}] stopped: {exc}")
            knowledge_store(run.client, run.where, collection=names[-1]).drop()  # its memory goes before the app's
            return figures, {"size": n, "why": str(exc)}, keep_l0
    return figures, None, keep_l0


def _result(
    figures: dict[int, dict[str, Any]],
    parts: dict[str, Any],
    machine: dict[str, Any],
    model: dict[str, Any],
    synth: Any,
    *,
    seed: int,
    queries: int,
    kb_peak: float | None,
    started: float,
) -> dict[str, Any]:
    """The run's figures as written: every size's, the ratios and goals, the app's, the CLI's and the store's."""
    app_fig, cli_fig, store_fig = parts["app"], parts["cli"], parts["store"]
    ratios, goals = ratios_and_goals(
        figures,
        store_fig,
        model_load_s=model["load_s"],
        app_rss_mb=(app_fig or {}).get("rss_mb"),
        l0_paired=parts["l0_paired"],
        app_fig=app_fig,
        cli_fig=cli_fig,
    )
    if synth is not None:  # ingest over the synthetic vector maker says nothing about the embedder
        goals["ingest_over_raw"].update(value=None, met=None)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "seed": seed,
        "queries": queries,
        "embedding_model": model["name"],
        "model_load_s": model["load_s"],
        "query_embed_p50_ms": model["query_embed"]["p50_ms"],
        "query_embed_p95_ms": model["query_embed"]["p95_ms"],
        "query_embed_first_ms": model["query_embed"]["first_ms"],
        "query_embed_queries": model["query_embed"]["queries"],
        "app_rss_mb": (app_fig or {}).get("rss_mb"),
        "app": app_fig or {"rss_mb": None, "why": "not asked for (app=False)"},
        "cli_lookup": cli_fig or {"warm_s": None, "why": "not asked for (cli=False)"},
        "corpus_vectors": "real" if synth is None else synth.describe(),
        "sizes": {str(n): f for n, f in figures.items()},
        "stopped": parts["stopped"],
        "l0_paired": parts["l0_paired"],
        "ratios": ratios,
        "goals": goals,
        "invocation_store": store_fig,
        "peak_rss_mb": kb_peak,
        "peak_rss_mb_with_invocation_store": peak_rss_mb(),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def _paired_l0(
    sizes: list[int], keep_l0: dict[int, tuple[L0Index, list[str]]], log: Callable[[str], None]
) -> dict[str, Any] | None:
    """L0 of the smallest and largest sizes side by side; their indexes go then, before the app's memory is measured."""
    paired = None
    if len(sizes) > 1 and sizes[0] in keep_l0 and sizes[-1] in keep_l0:
        log(f"L0 of {sizes[0]:,} and {sizes[-1]:,} entries side by side")
        paired = {"sizes": [sizes[0], sizes[-1]], **paired_l0_growth(keep_l0[sizes[0]], keep_l0[sizes[-1]])}
    keep_l0.clear()
    return paired


def _beside_sizes(
    run: _SizeRun, workdir: Path, extras: dict[str, Any], log: Callable[[str], None]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The figures measured once per run: the app's memory and pages, the CLI lookup, the invocation store."""
    from retrieval.bench.app import APP_ENTRIES, app_memory

    app_fig = None
    if extras["app"]:
        entries = extras["app_entries"] or APP_ENTRIES
        app_fig = app_memory(run.where, run.client, run.embedder, workdir=workdir, run_id=run.run_id, log=log, entries=entries)
    cli_fig = _cli_figure(run.where, workdir, log) if extras["cli"] else None
    run.recorder.flush()
    store_fig = None
    if extras["invocation_rows"]:
        budget = db_budget(run.settings)
        store_fig = bench_invocation_store(
            run.recorder, workdir, extras["invocation_rows"], seed=run.seed, log=log, budget=budget
        )
    return app_fig, cli_fig, store_fig


def _l0_figures(l0: L0Index, queries: list[str]) -> dict[str, Any]:
    """L0's match time and matches per query over `queries`."""
    times, matched = [], []
    for q in queries:
        t1 = time.perf_counter()
        hints = l0.match(q)
        times.append((time.perf_counter() - t1) * 1000)
        matched.append(len(hints.matches))
    return {
        "p50_ms": pct(times, 50),
        "p95_ms": pct(times, 95),
        "matches_p50": pct(matched, 50),
        "matches_max": max(matched, default=0),
    }


def _filtered_figures(
    out: dict[str, Any],
    store: Any,
    corpus: Any,
    vectors: Any,
    embedder: Embedder,
    look_q: list[str],
    all_q: list[str],
    top_k: int,
    log: Callable[[str], None],
) -> None:
    """Filtered against unfiltered L1 under each filter strategy, and filtered recall against the exact ranking."""
    from retrieval.bench.vectors import filter_strategies, filtered_recall

    n = len(corpus.entries)
    log(f"[{n}] filtered against unfiltered L1 under each filter strategy")
    qvecs = [embedder.embed_query(q) for q in look_q]
    out["filter_strategies"] = filter_strategies(store, qvecs, sorted(synthetic.DOMAINS), k=top_k)
    depth = max(RECALL_K, top_k)
    per_domain = min(RECALL_PER_DOMAIN, len(all_q) // RECALL_DOMAINS)  # the lookup and floor texts both serve
    log(f"[{n}] filtered recall@{depth} against the exact filtered ranking, {per_domain} queries per domain")
    rvecs = [embedder.embed_query(q) for q in all_q[: per_domain * RECALL_DOMAINS]]
    domains = sorted(synthetic.DOMAINS)[:RECALL_DOMAINS]
    recall = filtered_recall(store, corpus, vectors, rvecs, domains, k=depth, per_category=per_domain)
    out["l1"].update(filtered_recall=recall["filtered_recall"], filtered_recall_detail=recall)


def _open_services(
    settings: Settings,
    client: Any,
    embedder: Embedder | None,
    workdir: Path,
    embed_queries: int,
    seed: int,
    log: Callable[[str], None],
) -> tuple[Settings, Any, Embedder, dict[str, Any]]:
    """Where the run's Weaviate is (the given client's, or one started here on free ports), its client, the
    embedder (a fresh one timed as it loads and embeds `embed_queries` queries, unless one is given) and its figures."""
    from retrieval.bench.app import model_figures, probe_queries

    where = (
        settings
        if settings.weaviate_url or client is not None
        else settings.with_(data_dir=workdir, embedded_port=free_port(), embedded_grpc_port=free_port())
    )
    log(f"loading a fresh {embedder.name if embedder else settings.embedding_model}, {embed_queries} query embeddings")
    probe, model = model_figures(
        embedder.spec if embedder else settings.embedding_model,
        model_dir=settings.model_dir,
        queries=probe_queries(embed_queries + 1, seed=seed),
    )
    embedder = embedder or probe
    del probe  # a given embedder is the bench's; the probe's memory goes
    if client is None:
        log("starting Weaviate" if not settings.weaviate_url else f"connecting to {settings.weaviate_url}")
        client = connect(where)
    return where, client, embedder, model
