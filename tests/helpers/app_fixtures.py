"""Fixtures every AppTest module uses (tests/app/conftest.py imports them): fresh caches, the navigation of a
running server, the address it is served on, and the app pointed at the session's Weaviate."""

from __future__ import annotations

import pytest

from retrieval.store.indexing import ingest

from .app import (
    point_app_at,
)


@pytest.fixture(autouse=True)
def fresh_caches():
    """Cached resources outlive an AppTest in this process: drop them (connections, corpus, store) around
    each test. The embedding model stays: it is immutable and takes seconds to load."""
    from app_support import resources

    resources.clear_all(keep_model=True)
    yield
    resources.clear_all(keep_model=True)


@pytest.fixture(autouse=True)
def navigation_like_a_running_server(monkeypatch):
    """AppTest sets PagesManager.uses_pages_directory back to None before every run, and with a pages/
    folder beside app.py, switch_page() then runs the page file alone (Streamlit's MPA v1 fallback),
    without app.py's frame. In a running server the first st.navigation call turns that fallback off for
    the life of the process; do the same here so tests see what users see."""
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


@pytest.fixture(autouse=True)
def served_on(request):
    """Streamlit's server.address as a running app would have it: 127.0.0.1 (.streamlit/config.toml), so the
    app may write; a test changes it with served_on(address). Restored afterwards."""
    from streamlit import config

    before = config.get_option("server.address")
    config.set_option("server.address", "127.0.0.1")
    yield lambda address: config.set_option("server.address", address)
    config.set_option("server.address", before)


@pytest.fixture
def app_env(monkeypatch, tmp_path, base_settings, sample_store):
    """The app on the session's Weaviate, collection TestSample (the sample corpus, indexed once)."""
    point_app_at(
        monkeypatch, tmp_path, url=f"http://127.0.0.1:{base_settings.embedded_port}", grpc_port=base_settings.embedded_grpc_port
    )
    return tmp_path


MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm_sample(weaviate_client, sample_corpus):
    """The sample corpus indexed with all-MiniLM-L6-v2 in the collection the settings derive for that model
    (Kb_sample_corpus_minilm), and that model; dropped after the module."""
    from retrieval.config import collection_for
    from retrieval.store.embedding import Embedder
    from retrieval.store.weaviate_store import KnowledgeStore

    model = Embedder(MINILM)
    store = KnowledgeStore(weaviate_client, collection_for(sample_corpus.root, MINILM))
    store.drop()
    ingest(store, sample_corpus, model)
    yield store, model
    store.drop()
