import re

import numpy as np
import pytest

from retrieval.errors import ModelError
from retrieval.store.embedding import MODEL_INPUT_LIMIT, Embedder
from retrieval.store.models import locate
from retrieval.types.models import MODELS, spec_of


def test_default_model_loads_from_its_installed_files(embedder):
    files = locate(embedder.spec)
    assert files.onnx.name == "bge-small-en-v1.5-q.onnx" and files.tokenizer.is_file()
    assert embedder.name == "bge-small-en-v1.5" and embedder.dimensions == 384 and embedder.max_tokens == 256
    assert embedder.load_s > 0


def test_a_single_query_runs_on_threads_that_sleep_and_batches_on_threads_that_spin():
    # spinning threads took the cores the lookup's Weaviate queries needed right after the query embedding;
    # runs back to back (ingest, eval priming) are faster with them
    fresh = Embedder()
    key = "session.intra_op.allow_spinning"
    assert fresh._single.get_session_options().get_session_config_entry(key) == "0"
    assert fresh._batch is None  # a process that only looks up holds one session
    single = fresh.embed_query("pod keeps restarting")
    assert fresh._batch is None
    fresh._cache.clear()
    fresh.prime(["pod keeps restarting"])  # the same query, on the batch session
    with pytest.raises(RuntimeError, match="does not have configuration"):  # onnxruntime's default: spinning
        fresh._batch.get_session_options().get_session_config_entry(key)
    assert np.allclose(fresh.embed_query("pod keeps restarting"), single, atol=1e-5)  # one model in both


def test_vectors_are_normalised_and_meaningful(embedder):
    v = embedder.embed(["the pod keeps crashing", "container restarts in a loop", "quarterly revenue report"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.1


def test_embed_keeps_the_input_order_while_batching_by_length(embedder):
    texts = ["a much longer text about etcd members losing their leader", "pod", "disk full on node"]
    together = embedder.embed(texts, batch_size=2)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_a_quantized_model_embeds_passages_side_by_side_each_alone(embedder):
    """One text per call on single-threaded sessions side by side: each vector is the one a call of that text alone
    gives, to the last bit, whatever the texts beside it and however many workers (a batch would change it)."""
    assert embedder.spec.quantized
    texts = [f"{word} on node {i}: the pod keeps restarting" for i, word in enumerate(["disk", "etcd", "dns", "vault", "gpu"])]
    alone = np.vstack([embedder._run([embedder.spec.passage_prefix + t], batch=True) for t in texts])
    for workers in (1, 2, 3):
        assert np.array_equal(embedder.embed(texts, workers=workers), alone)
    assert np.array_equal(embedder.embed(texts[::-1])[::-1], alone)  # the order of the others does not matter
    assert len(embedder._workers) == 3  # sessions opened once, kept for the next ingest
    for session, _ in embedder._workers:
        assert session.get_session_options().intra_op_num_threads == 1


def test_query_vectors_are_cached_and_carry_the_query_prefix(embedder):
    a = embedder.embed_query("etcd has no leader")
    b = embedder.embed_query("etcd has no leader")
    assert a is b
    # bge prefixes queries with an instruction and passages with nothing: the two vectors differ but agree
    passage = embedder.embed(["etcd has no leader"])[0]
    assert not np.allclose(a, passage, atol=1e-3) and float(a @ passage) > 0.8


def test_input_over_the_model_limit_is_truncated_not_a_crash(embedder):
    long_text = "node disk pressure " * (MODEL_INPUT_LIMIT * 2)
    assert embedder.count_tokens(long_text) > MODEL_INPUT_LIMIT
    assert embedder.embed([long_text]).shape == (1, 384)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_catalogued_model_gives_its_own_normalised_vectors(name):
    model = Embedder(name)
    v = model.embed(["the pod keeps crashing", "container restarts in a loop", "quarterly revenue report"])
    assert v.shape == (3, model.dimensions)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_minilm_pools_the_hidden_states_not_the_second_output():
    # MiniLM's ONNX file has a second output that is not the sentence vector (cosine ~0.15 with it); mean pooling of
    # the first gives near-identical texts a near-1 cosine.
    model = Embedder("all-MiniLM-L6-v2")
    a, b = model.embed(["The pod is crash looping.", "The pod is crash-looping."])
    assert float(a @ b) > 0.95


def test_an_unknown_model_names_the_known_ones():
    with pytest.raises(ModelError, match=re.escape("bge-small-en-v1.5")):
        spec_of("gpt-17")


def test_a_model_dir_without_the_files_names_them(tmp_path):
    with pytest.raises(ModelError, match=re.escape("bge-small-en-v1.5-q.onnx")):
        Embedder("bge-small-en-v1.5", model_dir=tmp_path)


def test_a_damaged_model_file_is_named(tmp_path):
    spec = spec_of("bge-small-en-v1.5")
    files = locate(spec)
    (tmp_path / spec.tokenizer_file).write_bytes(files.tokenizer.read_bytes())
    (tmp_path / spec.onnx_file).write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="cannot be loaded"):
        Embedder(spec, model_dir=tmp_path)
