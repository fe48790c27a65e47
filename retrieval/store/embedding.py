"""Embeddings on onnxruntime with the model's own tokenizer (see `models` for the catalogue and the files)."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ModelError
from retrieval.store.models import locate
from retrieval.types.models import DEFAULT_MODEL, ModelSpec, spec_of

MODEL_INPUT_LIMIT = 512  # tokens: longer input makes these BERT-sized models fail in onnxruntime
NO_SPINNING = ("session.intra_op.allow_spinning", "0")  # the session config entry that keeps idle threads asleep


def ingest_workers() -> int:
    """Sessions that embed side by side at ingest: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Embedder:
    """Turns text into normalised vectors with one model. Thread-safe; query vectors are cached (LRU).
    `tokenizer` (no truncation or padding) counts and splits chunk text; `max_tokens`: the chunk size; `load_s`: load time."""

    def __init__(
        self, model: str | ModelSpec = DEFAULT_MODEL, *, model_dir: Path | None = None, cache_size: int = 4096, threads: int = 0
    ) -> None:
        from tokenizers import Tokenizer

        started = time.perf_counter()
        self.spec = model if isinstance(model, ModelSpec) else spec_of(model)
        self._files = locate(self.spec, model_dir)
        self._threads = threads
        try:
            self.tokenizer = Tokenizer.from_file(str(self._files.tokenizer))
        except Exception as exc:  # a damaged file: say which
            raise ModelError(f"embedding model {self.spec.name}: {self._files.tokenizer} cannot be loaded: {exc}") from exc
        self._single = self._open(spinning=False)
        self._batch: Any = None  # opened by the first batch
        self._workers: list[tuple[Any, Any]] = []  # (session, tokenizer) per parallel worker, opened by the first embed
        # Our own limits: MiniLM's tokenizer.json pads and truncates to 128 by itself.
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self._encoder = self._new_encoder()
        self._inputs = {i.name for i in self._single.get_inputs()}
        self.name = self.spec.name
        self.dimensions = self.spec.dimensions
        self.max_tokens = self.spec.max_tokens
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self.load_s = time.perf_counter() - started

    def _open(self, *, spinning: bool, threads: int | None = None) -> Any:
        """An onnxruntime session of the model: for single queries with threads that sleep after a run (spinning ones take the
        cores the lookup's L1 queries need next), or for batches with spinning threads (faster back to back), opened at the
        first batch so that a process that only looks up holds one session."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads if threads is None else threads
        options.log_severity_level = 3
        if not spinning:
            options.add_session_config_entry(*NO_SPINNING)
        try:
            return ort.InferenceSession(str(self._files.onnx), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a damaged file: say which
            raise ModelError(f"embedding model {self.spec.name}: {self._files.onnx} cannot be loaded: {exc}") from exc

    def _batch_session(self) -> Any:
        if self._batch is None:
            self._batch = self._open(spinning=True)
        return self._batch

    def _new_encoder(self) -> Any:
        """A tokenizer that feeds the model: truncated to its input limit, padded with its own pad id."""
        from tokenizers import Tokenizer

        encoder = Tokenizer.from_file(str(self._files.tokenizer))
        encoder.enable_truncation(MODEL_INPUT_LIMIT)
        encoder.enable_padding(pad_id=self._pad_id(), pad_token="[PAD]")
        return encoder

    def _pad_id(self) -> int:
        pad = self.tokenizer.token_to_id("[PAD]")
        return 0 if pad is None else int(pad)

    def _run(self, texts: Sequence[str], *, batch: bool = False, worker: tuple[Any, Any] | None = None) -> np.ndarray:
        """Normalised vectors of `texts` as they are (prefixes already added), on the batch session, the single
        query's (_open), or a parallel worker's (session, tokenizer)."""
        encoder = self._encoder if worker is None else worker[1]
        encodings = encoder.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session = worker[0] if worker is not None else self._batch_session() if batch else self._single
        hidden = session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _parallel_workers(self, n: int) -> list[tuple[Any, Any]]:
        """n (session, tokenizer) pairs of one intra-op thread each, opened once: a quantized model embeds one text
        per call, and such a call on small inputs keeps two intra-op threads only half busy, where two calls side by
        side (onnxruntime lets go of the GIL while it runs) keep both cores busy."""
        with self._lock:
            while len(self._workers) < n:
                self._workers.append((self._open(spinning=True, threads=1), self._new_encoder()))
            return self._workers[:n]

    def embed_each(self, texts: Sequence[str], *, workers: int | None = None) -> np.ndarray:
        """Passage vectors, one text per call, on `workers` single-threaded sessions side by side (default: one per
        core, `ingest_workers`): each vector is the one a call of that text alone gives."""
        total = len(texts)
        out = np.zeros((total, self.dimensions), dtype=np.float32)
        prefix = self.spec.passage_prefix
        pool = self._parallel_workers(max(1, workers or ingest_workers()))

        def lane(k: int) -> None:  # every len(pool)-th text, one call each
            for i in range(k, total, len(pool)):
                out[i] = self._run([prefix + texts[i]], worker=pool[k])[0]

        if len(pool) == 1 or total <= 1:
            lane(0)
        else:
            with ThreadPoolExecutor(len(pool), thread_name_prefix="embed") as ex:
                for f in [ex.submit(lane, k) for k in range(len(pool))]:
                    f.result()
        return out

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int, int], None] | None = None,
        workers: int | None = None,
    ) -> np.ndarray:
        """Passage vectors for many texts, in order, batched by length; `progress(done, total)` after each batch. A quantized
        model embeds one text per call (so a vector never depends on its batch) on `workers` single-threaded sessions side
        by side (default `ingest_workers`: one per core), and calls `progress` once, at the end."""
        total = len(texts)
        if self.spec.quantized:
            out = self.embed_each(texts, workers=workers)
            if progress:  # called on the caller's thread (a page's progress bar must not be drawn from a worker)
                progress(total, total)
            return out
        out = np.zeros((total, self.dimensions), dtype=np.float32)
        prefix = self.spec.passage_prefix
        order = sorted(range(total), key=lambda i: len(texts[i]))
        for start in range(0, total, batch_size):
            picked = order[start : start + batch_size]
            with self._lock:
                out[picked] = self._run([prefix + texts[i] for i in picked], batch=True)
            if progress:
                progress(min(start + batch_size, total), total)
        return out

    def _query_vectors(self, texts: Sequence[str], *, batch: bool = False) -> np.ndarray:
        return self._run([self.spec.query_prefix + t for t in texts], batch=batch)

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector (with the model's query prefix), cached by text."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
            vec = self._query_vectors([text])[0]
            self._remember(text, vec)
            return vec

    def _remember(self, text: str, vec: np.ndarray) -> None:
        self._cache[text] = vec
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def prime(self, texts: Sequence[str], *, batch_size: int = 32) -> None:
        """Embed many queries in batches and keep them in the query cache (eval runs reuse them)."""
        todo = sorted(dict.fromkeys(t for t in texts if t not in self._cache), key=len)
        batch_size = 1 if self.spec.quantized else batch_size
        for start in range(0, len(todo), batch_size):
            group = todo[start : start + batch_size]
            with self._lock:
                for text, vec in zip(group, self._query_vectors(group, batch=True), strict=True):
                    self._remember(text, vec)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
