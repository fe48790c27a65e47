"""`python -m retrieval.bench.compression`: what each vector compression (none, rq, pq, bq, sq) costs and saves.
Per compression and size, a fresh embedded Weaviate with synthetic vectors: server RSS, filtered and unfiltered recall@10
against the exact ranking, query p50; with `--eval-sets DIR`, each set's mrr@10 with real vectors too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench import synthetic
from retrieval.bench.common import dir_mb, paired_l1, pct
from retrieval.bench.runner import _exit_on_sigterm, _server_pid, _server_rss_mb
from retrieval.bench.vectors import SyntheticVectors, filtered_recall
from retrieval.config import Settings, load_settings
from retrieval.core.chunking import chunk_entry
from retrieval.core.corpus import Corpus
from retrieval.engine.ports import free_port
from retrieval.engine.server import connect
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.types.modes import VectorCompression, values

K = 10  # the depth of recall@k and mrr@k
COLLECTION = "Compression_bench"
RECALL_CATEGORIES = 3  # domains whose filtered recall is measured, 25 queries each (as the bench does)
# What a child eval may not inherit: it must use its own embedded server, data and the set's own corpus.
CHILD_DROPPED = ("LOOKUP_WEAVIATE_URL", "LOOKUP_CORPUS_DIR", "LOOKUP_COLLECTION", "LOOKUP_DB_PATH", "LOOKUP_CONFIG")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def exact_top(matrix: np.ndarray, owners: np.ndarray, query: np.ndarray, k: int) -> set[str]:
    """The exact top k entries of a query: cosine against every chunk, each entry ranked by its best chunk."""
    sims = matrix @ (query / np.linalg.norm(query))
    best: list[str] = []
    for i in np.argsort(-sims):
        owner = str(owners[i])
        if owner not in best:
            best.append(owner)
            if len(best) == k:
                break
    return set(best)


BENCH_QUERY_TIMEOUT_S = 120.0  # the client's query limit on the bench's own servers


def measure_compression(
    compression: str,
    corpus: Corpus,
    *,
    settings: Settings,
    vectors: SyntheticVectors,
    qvecs: Sequence[np.ndarray],
    exact: Sequence[set[str]],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One compression on a fresh server: ingest `corpus`, then RSS, recall and query times."""
    workdir = Path(tempfile.mkdtemp(prefix=f"lookup-compression-{compression}-"))
    where = settings.with_(
        data_dir=workdir,
        embedded_port=free_port(),
        embedded_grpc_port=free_port(),
        weaviate_url=None,
        l1_enabled=True,
        # a fresh server ingesting on a busy machine can take over the lookup's 10 s for one maintenance query (the
        # partition's tenant counts); the figures are timed here, not bounded by the client
        l1_timeout_s=max(settings.l1_timeout_s, BENCH_QUERY_TIMEOUT_S),
    )
    out: dict[str, Any] = {"compression": compression, "loadavg": {"start": _load()}}
    client = connect(where)
    try:
        store = knowledge_store(client, where.with_(vector_compression=compression), collection=COLLECTION, embedding_model="")
        store.drop()
        log(f"[{compression}] ingest of {len(corpus.entries):,} entries")
        t0 = time.perf_counter()
        report = indexing.ingest(store, corpus, vectors)
        out["ingest_s"] = round(time.perf_counter() - t0, 1)
        out["chunks"] = report.chunks_embedded
        out["loadavg"]["ingest"] = _load()
        out["collection_compression"] = store.compression()  # what the server says it made
        out["rss_after_ingest_mb"] = _server_rss_mb(_server_pid(client))
        log(f"[{compression}] {len(qvecs)} queries, unfiltered and filtered")
        domains = sorted(synthetic.DOMAINS)
        unf, fil, found, _ = paired_l1(store, qvecs, domains, k=K)
        recalls = [len(hits & exact[i]) / len(exact[i]) for i, hits in enumerate(found)]
        out["query_p50_ms"] = {"unfiltered": pct(unf, 50), "filtered": pct(fil, 50)}
        out["unfiltered_recall"] = round(float(np.mean(recalls)), 4) if recalls else None
        out["loadavg"]["queries"] = _load()
        log(f"[{compression}] filtered recall@{K} against the exact filtered ranking")
        recall = filtered_recall(store, corpus, vectors, qvecs, domains[:RECALL_CATEGORIES], k=K)
        out["filtered_recall"] = recall["filtered_recall"]
        out["filtered_recall_queries"] = recall["queries"]
        out["rss_after_queries_mb"] = _server_rss_mb(_server_pid(client))
        out["loadavg"]["end"] = _load()
    finally:
        client.close()  # stops the server
        out["data_dir_mb"] = dir_mb(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    return out


def measure_size(
    n: int,
    compressions: Sequence[str],
    *,
    settings: Settings,
    embedder: Embedder,
    seed: int,
    queries: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Every compression at one size, on the same corpus, vectors and queries."""
    body = synthetic.FULL if n <= 2000 else synthetic.SHORT  # as the bench: one short chunk per entry above 2,000
    corpus = synthetic.make_corpus(n, seed=seed + n, body=body)
    vectors = SyntheticVectors(embedder, seed=seed)
    # filtered_recall takes RECALL_CATEGORIES * 25 query vectors; the timed queries are at least that many
    texts = synthetic.make_queries(list(corpus.entries), max(queries, RECALL_CATEGORIES * 25), seed=seed * 31 + n)
    qvecs = [embedder.embed_query(q) for q in texts]
    log(f"[{n}] the exact ranking of {len(qvecs)} queries over every chunk")
    chunks = [ch for e in corpus.entries for ch in chunk_entry(e, vectors.tokenizer, vectors.max_tokens)]
    matrix = np.asarray(vectors.embed([ch.text for ch in chunks]), dtype=np.float32)
    owners = np.array([ch.entry_id for ch in chunks])
    exact = [exact_top(matrix, owners, np.asarray(v, dtype=np.float32), K) for v in qvecs]
    del matrix
    figures = {
        c: measure_compression(c, corpus, settings=settings, vectors=vectors, qvecs=qvecs, exact=exact, log=log)
        for c in compressions
    }
    return {"entries": n, "chunks": len(chunks), "body_words": body.label, "queries": len(qvecs), "compressions": figures}


def eval_sets(
    sets_dir: Path,
    compressions: Sequence[str],
    *,
    log: Callable[[str], None],
    env: dict[str, str] | None = None,
    pattern: str = "*.yaml",
) -> dict[str, Any]:
    """Each eval set of `sets_dir` (matching `pattern`) under each compression, with real vectors: the `lookup`
    configuration's mrr@10 (None for a set with no answerable case). One fresh data directory and port pair per
    compression; each figure is logged as it comes."""
    sets = sorted(sets_dir.glob(pattern))
    if not sets:
        raise FileNotFoundError(f"--eval-sets {sets_dir}: no eval sets matching {pattern} there")
    base = {k: v for k, v in (os.environ if env is None else env).items() if k not in CHILD_DROPPED}
    out: dict[str, Any] = {}
    for compression in compressions:
        workdir = Path(tempfile.mkdtemp(prefix=f"lookup-compression-eval-{compression}-"))
        child = {
            **base,
            "LOOKUP_VECTOR_COMPRESSION": compression,
            "LOOKUP_DATA_DIR": str(workdir),
            "LOOKUP_WEAVIATE_PORT": str(free_port()),
            "LOOKUP_WEAVIATE_GRPC_PORT": str(free_port()),
        }
        per_set: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            for path in sets:
                log(f"[eval {compression}] {path.name}")
                done = subprocess.run(
                    [sys.executable, "-m", "retrieval", "eval", str(path), "--json", "--configs", "lookup", "--no-save"],
                    env=child,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"eval {path.name} with {compression}: exit {done.returncode}: {done.stderr[-2000:]}")
                lookup = json.loads(done.stdout)["configs"]["lookup"]
                per_set[path.stem] = None if lookup.get("mrr@10") is None else round(float(lookup["mrr@10"]), 4)
                log(f"[eval {compression}] {path.stem}: lookup mrr@10 {per_set[path.stem]}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        out[compression] = {"mrr@10": per_set, "elapsed_s": round(time.perf_counter() - t0, 1), "loadavg_end": _load()}
    return out


def run(
    sizes: Sequence[int],
    compressions: Sequence[str] = values(VectorCompression),
    *,
    settings: Settings | None = None,
    queries: int = 100,
    seed: int = 98294,
    eval_sets_dir: Path | None = None,
    eval_pattern: str = "*.yaml",
    log: Callable[[str], None] | None = None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """The figures of every size and compression, and of the eval sets when `eval_sets_dir` is given. Each
    compression gets an embedded Weaviate of its own on free ports, whatever server `settings` name."""
    log = log or (lambda m: None)
    unknown = [c for c in compressions if c not in values(VectorCompression)]
    if unknown or not compressions:
        raise ValueError(f"--compressions {','.join(compressions)}: each one of {', '.join(values(VectorCompression))}")
    if (not sizes and eval_sets_dir is None) or min(sizes, default=1) < 1 or queries < 1:
        raise ValueError("compression bench needs sizes >= 1 (or eval sets) and queries >= 1")
    settings = settings or load_settings()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seed": seed,
        "k": K,
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "corpus_vectors": "synthetic (retrieval/bench/vectors.py): recall and memory hold, mrr does not",
        "sizes": {},
    }
    if sizes:
        embedder = embedder or Embedder(settings.embedding_model, model_dir=settings.model_dir)
        result["embedding_model"] = embedder.spec.name
        for n in sorted(set(sizes)):
            result["sizes"][str(n)] = measure_size(
                n, compressions, settings=settings, embedder=embedder, seed=seed, queries=queries, log=log
            )
    if eval_sets_dir is not None:
        result["eval_sets"] = eval_sets(eval_sets_dir, compressions, log=log, pattern=eval_pattern)
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["elapsed_s"] = round(time.perf_counter() - started, 1)
    return result


def render_table(result: dict[str, Any]) -> str:
    """A markdown table per size, and one of the eval sets' mrr@10."""
    lines: list[str] = []

    def mb(fig: dict[str, float] | None) -> str:
        return "n/a" if not fig else f"{fig['now_mb']:,.0f} / {fig['peak_mb']:,.0f}"

    for n, size in result["sizes"].items():
        lines += [
            f"{int(n):,} entries ({size['chunks']:,} chunks, {size['queries']} queries, synthetic vectors)",
            "",
            "| compression | RSS MB after ingest (now / peak) | after queries | filtered recall@10 | recall@10 | "
            "p50 ms unfiltered / filtered | ingest s | load |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c, f in size["compressions"].items():
            p50 = f["query_p50_ms"]
            lines.append(
                f"| {c} ({f['collection_compression']}) | {mb(f['rss_after_ingest_mb'])} | {mb(f['rss_after_queries_mb'])} | "
                f"{f['filtered_recall']} | {f['unfiltered_recall']} | {p50['unfiltered']} / {p50['filtered']} | "
                f"{f['ingest_s']} | {f['loadavg']['ingest']}-{f['loadavg']['end']} |"
            )
        lines.append("")
    if "eval_sets" in result:
        evals = result["eval_sets"]
        names = sorted({s for e in evals.values() for s in e["mrr@10"]})
        lines += ["lookup mrr@10 (real vectors)", "", "| set | " + " | ".join(evals) + " |", "|---" * (len(evals) + 1) + "|"]
        for s in names:
            lines.append(f"| {s} | " + " | ".join(str(e["mrr@10"].get(s)) for e in evals.values()) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retrieval.bench.compression", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated entry counts (0: none, eval sets only)")
    known = ",".join(values(VectorCompression))
    parser.add_argument("--compressions", default=known, help=f"comma-separated, of {known}")
    parser.add_argument("--queries", type=int, default=100, help="timed queries per compression (at least 75 are used)")
    parser.add_argument("--seed", type=int, default=98294)
    parser.add_argument("--eval-sets", type=Path, default=None, help="a folder of eval sets: their lookup mrr@10 per compression")
    parser.add_argument("--eval-glob", default="*.yaml", help="which sets of --eval-sets, e.g. '*[!e].yaml'")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of the tables")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip() and int(s) > 0]
    compressions = [c.strip().lower() for c in args.compressions.split(",") if c.strip()]
    restore_sigterm = _exit_on_sigterm()  # SIGTERM still stops the servers started here (the finally blocks)
    try:
        result = run(
            sizes,
            compressions,
            queries=args.queries,
            seed=args.seed,
            eval_sets_dir=args.eval_sets,
            eval_pattern=args.eval_glob,
            log=lambda m: print(f"{time.strftime('%H:%M:%S')} load {_load()} {m}", file=sys.stderr, flush=True),
        )
    finally:
        restore_sigterm()
    print(json.dumps(result, indent=2) if args.json else render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
