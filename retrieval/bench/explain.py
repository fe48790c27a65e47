"""The bench's figures of "Why not this entry?": one entry explained (the trace, and what it would take) against the
lookup's own time in the same run, and what classifying a miss adds to an eval run's lookup."""

from __future__ import annotations

import random
import time
from typing import Any

from retrieval.bench.common import pct
from retrieval.core.explain import explain_entry, run_view
from retrieval.core.lookup import search_text
from retrieval.core.miss_cause import classify
from retrieval.core.protocols import LookupServices
from retrieval.core.remedies import what_it_would_take
from retrieval.core.runner import run_lookup
from retrieval.types.options import LookupOptions

EXPLAINS = 20  # entries explained per size: each a query of the bench's and an entry drawn at random (mostly far down)


def bench_explain(services: LookupServices, options: LookupOptions, queries: list[str], *, seed: int) -> dict[str, Any]:
    """Per query, interleaved: the lookup (the runner alone, no record), the trace of a random entry, what it would take
    for it, and the miss classification of the lookup's run (what an eval run adds per case and configuration)."""
    rng = random.Random(seed)
    ids = sorted(services.l0.entries)
    lookup, trace, remedy, classified = [], [], [], []
    for q in queries[:EXPLAINS]:
        searched = search_text(q)
        t0 = time.perf_counter()
        run = run_lookup(searched, services, options)
        lookup.append((time.perf_counter() - t0) * 1000)
        expected = {rng.choice(ids): 1}
        t0 = time.perf_counter()
        classify(expected, run_view(run, options), services.l0.entries, claimed=run.relevance.semantic_support)
        classified.append((time.perf_counter() - t0) * 1000)
        entry = next(iter(expected))
        t0 = time.perf_counter()
        explain_entry(q, entry, services, options)
        trace.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        what_it_would_take(q, entry, services, options)
        remedy.append((time.perf_counter() - t0) * 1000)
    lookup_p50, classify_p50 = pct(lookup, 50), pct(classified, 50)
    return {
        "explained": len(trace),
        "lookup_p50_ms": lookup_p50,
        "trace_p50_ms": pct(trace, 50),
        "trace_p95_ms": pct(trace, 95),
        "what_it_would_take_p50_ms": pct(remedy, 50),
        "what_it_would_take_p95_ms": pct(remedy, 95),
        "classify_p50_ms": classify_p50,
        "classify_share_of_lookup": None if not lookup_p50 or classify_p50 is None else round(classify_p50 / lookup_p50, 4),
    }
