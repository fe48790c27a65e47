"""What a knowledge collection is made of: its properties, the BM25F fields, and its vector index (the quantizer
and the filter settings), for KnowledgeStore to create, check and migrate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weaviate.classes.config import (
    Configure,
    DataType,
    Property,
    Reconfigure,
    Tokenization,
    VectorDistances,
    VectorFilterStrategy,
)

from retrieval.config import DEFAULT_VECTOR_COMPRESSION
from retrieval.errors import ConfigError
from retrieval.types.modes import VectorCompression, values

PROPERTIES = (
    "entry_id",
    "chunk_index",
    "chunk_count",
    "content_hash",
    "title",
    "category",
    "heading",
    "keywords",
    "entities",
    "body",
    "text",
)
# BM25F fields. Only an entry's card (chunk 0) carries them, so lexical search scores whole entries: the
# title and file name as words, the frontmatter keywords and entities, and the whole body.
LEXICAL_FIELDS = ("heading", "keywords", "entities", "body")
# Filtered vector search. Below flatSearchCutoff allowed objects Weaviate compares the query with every one of
# them; at 100k entries one domain holds about 24,000 chunks, so with the default cutoff (40,000) a filtered
# search scanned them all and took 4x an unfiltered one. With ACORN and a cutoff of 1,000 it walks the graph:
# 1.14-1.23x, filtered recall@10 0.984 against the exact ranking (bench 2026-12-02-082819, docs/history/benchmarks-notebook.md).
FILTER_STRATEGY = "acorn"
FLAT_SEARCH_CUTOFF = 1000
# Vector compression (LOOKUP_VECTOR_COMPRESSION): the HNSW index's quantizer. PQ and SQ compress only once the
# collection holds TRAINING_LIMIT objects (Weaviate's default is 100,000, which a knowledge base of a few thousand
# chunks never reaches): 1,000 fits SQ's per-dimension ranges and PQ's 256 centroids per segment, and compresses
# the shared corpora too. Figures in docs/benchmarks.md ("Vector compression").
TRAINING_LIMIT = 1000
REBUILD = "python -m retrieval ingest --rebuild"


def quantizer_for(compression: str, *, reconfigure: bool = False) -> Any:
    """The quantizer of a compression ("none": none, so no server default applies): Configure's for a new
    collection, or with `reconfigure` Reconfigure's, which turns it on in an uncompressed index (no "none")."""
    q = Reconfigure.VectorIndex.Quantizer if reconfigure else Configure.VectorIndex.Quantizer
    makers: dict[str, Callable[[], Any]] = {
        "rq": q.rq,
        "bq": q.bq,
        "pq": lambda: q.pq(training_limit=TRAINING_LIMIT),
        "sq": lambda: q.sq(training_limit=TRAINING_LIMIT),
    }
    if not reconfigure:
        makers["none"] = Configure.VectorIndex.Quantizer.none
    if compression not in makers:
        raise ConfigError(
            f"vector_compression (LOOKUP_VECTOR_COMPRESSION): {compression!r} is not one of "
            f"{', '.join(values(VectorCompression))}"
        )
    return makers[compression]()


def compression_of(quantizer: Any) -> str:
    """The compression (none, rq, pq, bq or sq) of a vector index config's `quantizer` (weaviate-client's _RQConfig ...)."""
    if quantizer is None:
        return "none"
    name = type(quantizer).__name__.lower().strip("_").removesuffix("config")
    return name if name in values(VectorCompression) else name or "unknown"


def chunk_properties() -> list[Property]:
    """The properties of every chunk: its entry, place and hash, the card's BM25F fields, and its text."""

    def text(n: str, **kw: Any) -> Property:
        return Property(name=n, data_type=DataType.TEXT, **kw)

    return [
        text("entry_id", tokenization=Tokenization.FIELD, skip_vectorization=True),
        Property(name="chunk_index", data_type=DataType.INT),
        Property(name="chunk_count", data_type=DataType.INT),
        text("content_hash", tokenization=Tokenization.FIELD),
        text("title"),
        text("category", tokenization=Tokenization.FIELD),
        text("heading"),
        Property(name="keywords", data_type=DataType.TEXT_ARRAY),
        Property(name="entities", data_type=DataType.TEXT_ARRAY),
        text("body"),
        text("text"),
    ]


def vector_index(compression: str | None, *, ef_construction: int | None = None, max_connections: int | None = None) -> Any:
    """The HNSW index of a collection: cosine distance, the filter strategy and cutoff, the quantizer of
    `compression` (default DEFAULT_VECTOR_COMPRESSION), and the graph settings (None: Weaviate's)."""
    return Configure.Vectors.self_provided(
        vector_index_config=Configure.VectorIndex.hnsw(
            distance_metric=VectorDistances.COSINE,
            filter_strategy=VectorFilterStrategy(FILTER_STRATEGY),
            flat_search_cutoff=FLAT_SEARCH_CUTOFF,
            quantizer=quantizer_for(compression or DEFAULT_VECTOR_COMPRESSION),
            ef_construction=ef_construction,
            max_connections=max_connections,
        )
    )
