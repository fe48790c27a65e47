"""Synthetic corpus vectors for `bench --vectors synthetic` (embedding a 100k-entry corpus takes hours), and filter figures.
A chunk's vector is its title's component and symptom embeddings summed plus noise: latency, growth and memory hold on
such a corpus, quality figures do not.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from weaviate.classes.config import Reconfigure, VectorFilterStrategy

from retrieval.bench import synthetic
from retrieval.bench.common import paired_l1, pct
from retrieval.core.chunking import chunk_entry
from retrieval.core.corpus import Corpus
from retrieval.core.search_request import SearchRequest
from retrieval.store.collection_schema import FILTER_STRATEGY, FLAT_SEARCH_CUTOFF
from retrieval.store.embedding import Embedder
from retrieval.store.weaviate_store import KnowledgeStore
from retrieval.types.modes import SearchMode

NOISE = 0.03  # per dimension: a noise vector of norm about 0.6 against a pair's vector of norm about 1.5
_WORDS = re.compile(r"[a-z0-9]+")


def _squeezed(text: str) -> str:
    """Lower-case letters and digits only: the card's split words ('S 3 bucket') match the title's ('S3 bucket')."""
    return "".join(_WORDS.findall(text.lower()))


def _text_key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


class SyntheticVectors:
    """An embedder for ingest whose chunk vectors are synthetic (see the module doc); queries use the model.
    A chunk's noise is seeded by `seed` and a hash of its text, so a text gets the same vector in any batch."""

    def __init__(
        self,
        model: Embedder,
        *,
        seed: int,
        components: Sequence[str] | None = None,
        symptoms: Sequence[str] | None = None,
        noise: float = NOISE,
    ) -> None:
        self.model, self.seed, self.noise = model, seed, noise
        self.tokenizer, self.max_tokens, self.dimensions = model.tokenizer, model.max_tokens, model.dimensions
        comps = list(components if components is not None else (c for cs in synthetic.DOMAINS.values() for c in cs))
        syms = list(symptoms if symptoms is not None else synthetic.SYMPTOMS)
        if not comps or not syms:
            raise ValueError("synthetic vectors need at least one component and one symptom")
        self.templates = comps + syms
        vecs = model.embed(self.templates, batch_size=64).astype(np.float64)
        self._comp, self._sym = vecs[: len(comps)], vecs[len(comps) :]
        self._pairs = [(i, j) for i in range(len(comps)) for j in range(len(syms))]
        self._index = {_squeezed(c + s): n for n, (c, s) in enumerate((c, s) for c in comps for s in syms)}
        self._longest = max(len(_WORDS.findall(f"{c} {s}")) for c in comps for s in syms) + 2

    def pair_of(self, text: str) -> tuple[int, int]:
        """(component, symptom) indices of a chunk."""
        words = _WORDS.findall(text.split("\n", 1)[0].lower())
        for n in range(min(len(words), self._longest), 1, -1):
            hit = self._index.get("".join(words[:n]))
            if hit is not None:
                return self._pairs[hit]
        return self._pairs[_text_key(text) % len(self._pairs)]

    def embed(self, texts: Sequence[str], **_: Any) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dimensions), dtype=np.float32)
        pairs = np.array([self.pair_of(t) for t in texts])
        noise = np.stack(
            [np.random.default_rng([self.seed, _text_key(t)]).normal(0.0, self.noise, self.dimensions) for t in texts]
        )
        out = self._comp[pairs[:, 0]] + self._sym[pairs[:, 1]] + noise
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.model.embed_query(text)

    def describe(self) -> str:
        return (
            f"SYNTHETIC corpus vectors: each chunk = the real embeddings of its title's component and symptom "
            f"({len(self._comp)} + {len(self._sym)} texts) summed, + Gaussian noise (sigma {self.noise} per dimension), "
            "renormalised; queries embedded by the model. Latency, growth and memory only: no quality figure holds."
        )


STRATEGIES = (  # (label, filter strategy, flatSearchCutoff (None: Weaviate's default of 40,000), ef (-1: dynamic))
    ("acorn", VectorFilterStrategy.ACORN, None, -1),
    ("sweeping", VectorFilterStrategy.SWEEPING, None, -1),
    ("acorn, cutoff 300", VectorFilterStrategy.ACORN, 300, -1),
    ("acorn, cutoff 1000", VectorFilterStrategy.ACORN, 1000, -1),
    ("acorn, cutoff 3000", VectorFilterStrategy.ACORN, 3000, -1),
    ("acorn, cutoff 10000", VectorFilterStrategy.ACORN, 10_000, -1),
    ("sweeping, cutoff 1000", VectorFilterStrategy.SWEEPING, 1000, -1),
    # A fixed, smaller ef: the dynamic ef (at least 100) is the same for filtered and unfiltered searches,
    # while a filtered ACORN search expands two hops per visited node.
    ("acorn, cutoff 1000, ef 48", VectorFilterStrategy.ACORN, 1000, 48),
    ("acorn, cutoff 1000, ef 64", VectorFilterStrategy.ACORN, 1000, 64),
)


def _reconfigure(store: KnowledgeStore, strategy: VectorFilterStrategy, cutoff: int, ef: int = -1) -> None:
    store.collection.config.update(
        vector_config=Reconfigure.Vectors.update(
            name="default",
            vector_index_config=Reconfigure.VectorIndex.hnsw(filter_strategy=strategy, flat_search_cutoff=cutoff, ef=ef),
        )
    )


def filter_strategies(
    store: KnowledgeStore, vectors: Sequence[np.ndarray], categories: Sequence[str], *, k: int
) -> dict[str, dict[str, Any]]:
    """Filtered against unfiltered L1 under each filter strategy, interleaved over the cached query `vectors`; the
    collection's own settings are restored at the end. `agreement`: the share of a strategy's filtered top k that the
    first (exact below Weaviate's default flat-search cutoff) also finds."""
    out: dict[str, dict[str, Any]] = {}
    first: list[set[str]] | None = None
    store.partitioned = False  # these rows time the where-filter on the collection, not the per-domain partition
    try:
        for label, strategy, cutoff, ef in STRATEGIES:
            _reconfigure(store, strategy, 40_000 if cutoff is None else cutoff, ef)
            unf, fil, _, found = paired_l1(store, vectors, categories, k=k)
            first = found if first is None else first
            shared = [len(a & b) / len(b) for a, b in zip(found, first, strict=True) if b]
            u, f = pct(unf, 50), pct(fil, 50)
            out[label] = {
                "unfiltered_p50_ms": u,
                "filtered_p50_ms": f,
                "filtered_over_unfiltered": round(f / u, 3) if u and f is not None else None,
                "agreement": round(float(np.mean(shared)), 4) if shared else None,
                "loadavg": round(os.getloadavg()[0], 2),
            }
    finally:
        store.partitioned = True
        _reconfigure(store, VectorFilterStrategy(FILTER_STRATEGY), FLAT_SEARCH_CUTOFF)
    return out


TIE_EPS = 0.002  # similarity: the synthetic vectors tie many entries this close at the k-th place


def filtered_recall(
    store: KnowledgeStore,
    corpus: Corpus,
    embedder: Any,
    queries: Sequence[np.ndarray],
    categories: Sequence[str],
    *,
    k: int,
    per_category: int = 25,
) -> dict[str, Any]:
    """Recall@k of the store's filtered search against the exact filtered ranking: the category's chunks embedded again by
    `embedder` (the one ingest used), compared by cosine in numpy, each entry ranked by its best chunk."""
    recalls: list[float] = []
    near: list[float] = []
    for c, category in enumerate(categories):
        entries = [e for e in corpus.entries if e.domain == category]
        chunks = [ch for e in entries for ch in chunk_entry(e, embedder.tokenizer, embedder.max_tokens)]
        if not chunks:
            continue
        matrix = np.asarray(embedder.embed([ch.text for ch in chunks]), dtype=np.float32)
        owners = np.array([ch.entry_id for ch in chunks])
        for vec in queries[c * per_category : (c + 1) * per_category]:
            q = np.asarray(vec, dtype=np.float32)
            sims = matrix @ (q / np.linalg.norm(q))
            order = np.argsort(-sims)
            best: dict[str, float] = {}
            for i in order:  # best chunk first: the first k distinct entries are the exact top k
                best.setdefault(str(owners[i]), float(sims[i]))
                if len(best) == k:
                    break
            exact: dict[str, float] = {}  # every entry's exact similarity (its best chunk)
            for i in order:
                exact.setdefault(str(owners[i]), float(sims[i]))
            found = {cand.entry_id for cand in store.search(SearchRequest(SearchMode.NEAR_VECTOR, k, vec, category=category))}
            recalls.append(len(found & set(best)) / len(best))
            # a found entry within TIE_EPS of the k-th exact similarity is as good as the one it displaced
            kth = min(best.values())
            near.append(sum(exact.get(e, -1.0) >= kth - TIE_EPS for e in found) / len(best))
    return {
        "filtered_recall": round(float(np.mean(recalls)), 4) if recalls else None,
        "min": round(float(np.min(recalls)), 4) if recalls else None,
        "within_tie": round(float(np.mean(near)), 4) if near else None,
        "queries": len(recalls),
        "categories": list(categories),
        "settings": {"filter_strategy": FILTER_STRATEGY, "flat_search_cutoff": FLAT_SEARCH_CUTOFF},
        "searched": "partition" if store.tenant_of(categories[0]) is not None else "where-filter",
    }
