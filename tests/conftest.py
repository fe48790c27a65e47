"""Shared fixtures: a real embedded Weaviate on a free port with a temporary data directory, the real
embedding model, and temporary DuckDB files. Nothing here is mocked."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from retrieval.config import REPO_ROOT, Settings, load_settings
from retrieval.corpus import load_corpus

SHARED = REPO_ROOT.parent / "shared"
RUNBOOKS = SHARED / "corpora" / "runbooks"
RUNBOOKS_EVAL = SHARED / "eval_sets" / "runbooks-alert-summaries.yaml"
SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def needs_shared() -> None:
    if not RUNBOOKS.is_dir():
        pytest.skip(f"the shared runbooks corpus is absent (looked for {RUNBOOKS.relative_to(REPO_ROOT.parent)} beside the repo)")


@pytest.fixture(scope="session")
def base_settings(tmp_path_factory) -> Settings:
    """Settings for the test session's own embedded Weaviate (free ports, temporary data)."""
    data = tmp_path_factory.mktemp("lookup-data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_")}
    return load_settings(
        env=env,
        config_file=None,
        data_dir=data,
        embedded_port=free_port(),
        embedded_grpc_port=free_port(),
        corpus_dir=SAMPLE_CORPUS,
    )


@pytest.fixture(scope="session")
def weaviate_client(base_settings):
    from retrieval.weaviate_server import connect

    client = connect(base_settings)
    yield client
    client.close()


@pytest.fixture(scope="session")
def embedder():
    from retrieval.embedding import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def sample_corpus():
    return load_corpus(SAMPLE_CORPUS)


@pytest.fixture(scope="session")
def sample_store(weaviate_client, embedder, sample_corpus):
    """The sample corpus indexed once for the session in collection 'TestSample'."""
    from retrieval.weaviate_store import KnowledgeStore

    store = KnowledgeStore(weaviate_client, "TestSample")
    store.drop()
    store.ingest(sample_corpus, embedder)
    return store


@pytest.fixture(scope="session")
def runbooks_corpus():
    needs_shared()
    return load_corpus(RUNBOOKS)


@pytest.fixture(scope="session")
def runbooks_store(weaviate_client, embedder, runbooks_corpus):
    from retrieval.weaviate_store import KnowledgeStore

    store = KnowledgeStore(weaviate_client, "TestRunbooks")
    store.drop()
    store.ingest(runbooks_corpus, embedder)
    return store


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "invocations.duckdb"
