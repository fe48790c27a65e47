"""The Corpus page's ingest with AppTest, against the session's real Weaviate and embedding model."""

from __future__ import annotations

from ..helpers.app import open_app, point_app_at, texts


def test_ingest_beside_a_collection_of_another_case_shows_one_error(monkeypatch, tmp_path, base_settings, sample_store):
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        collection="Testsample",
    )
    at = open_app("Corpus")
    at.button(key="corpus_ingest").click().run()
    assert not at.exception
    shown = " ".join(texts(at.error))
    assert "collection 'Testsample' differs from the existing collection 'TestSample'" in shown, shown
    assert "LOOKUP_COLLECTION" in shown and "Traceback" not in shown
