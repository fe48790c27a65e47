"""The build's source patch, on the real upstream files of the pinned Weaviate module (from the Go module cache that
scripts/setup.sh filled), on unexpected text, and on the built binary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from weaviate.embedded import EmbeddedOptions, EmbeddedV4

from retrieval.config import WEAVIATE_VERSION
from retrieval.engine.build import (
    IMPORTS,
    PATCH_TAG,
    PATCHES,
    ListenPatch,
    binary_path,
    check_patched,
    module_dir,
    patch_source,
    write_overlay,
)
from retrieval.engine.server import embedded_binary
from retrieval.errors import WeaviateSetupError

GRPC = next(p for p in PATCHES if p.env == "GRPC_BIND_HOST")
UPSTREAM = 'fmt.Sprintf(":%d", state.ServerConfig.Config.GRPC.Port)'  # what v1.38.11 listens on


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    """The pinned module's directory in the Go module cache."""
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-buildvcs=false"}
    return module_dir(WEAVIATE_VERSION, env=env, cwd=tmp_path_factory.mktemp("go"))


def gofmt_parses(source: str) -> None:
    gofmt = shutil.which("gofmt") or str(
        Path(subprocess.check_output(["go", "env", "GOROOT"], text=True).strip(), "bin", "gofmt")
    )
    done = subprocess.run([gofmt, "-e"], input=source, text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


# What each upstream file of v1.38.11 has, and what the patch makes of it.
REWRITES = {
    "adapters/handlers/grpc/server.go": (
        'net.Listen("tcp", fmt.Sprintf(":%d",\n\t\tstate.ServerConfig.Config.GRPC.Port))',
        'net.Listen("tcp", lookuplabnet.JoinHostPort(lookuplabos.Getenv("GRPC_BIND_HOST"), fmt.Sprint(\n'
        "\t\tstate.ServerConfig.Config.GRPC.Port)))",
    ),
    "adapters/handlers/rest/clusterapi/serve.go": (
        'Addr:      fmt.Sprintf(":%d", port),',
        'Addr:      lookuplabnet.JoinHostPort(lookuplabos.Getenv("CLUSTER_DATA_BIND_HOST"), fmt.Sprint(port)),',
    ),
    "adapters/handlers/rest/clusterapi/grpc/server.go": (
        'net.Listen("tcp", fmt.Sprintf(":%d",\n\t\ts.state.ServerConfig.Config.Cluster.DataBindPort))',
        'net.Listen("tcp", lookuplabnet.JoinHostPort(lookuplabos.Getenv("CLUSTER_DATA_BIND_HOST"), fmt.Sprint(\n'
        "\t\ts.state.ServerConfig.Config.Cluster.DataBindPort)))",
    ),
}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.path)
def test_the_patch_binds_each_upstream_listener_to_its_variable(upstream, patch):
    original = (upstream / patch.path).read_text(encoding="utf-8")
    before, after = REWRITES[patch.path]
    assert original.count(before) == 1
    package = next(line for line in original.splitlines() if line.startswith("package "))
    patched = patch_source(original, patch, path=patch.path)
    # exactly the listener and one import block after the package clause, nothing else
    assert patched == original.replace(before, after).replace(package + "\n", package + IMPORTS + "\n", 1)
    assert '\tlookuplabnet "net"\n\tlookuplabos "os"\n' in patched
    gofmt_parses(patched)  # still Go


def test_the_grpc_listener_keeps_its_layout():
    text = 'package grpc\n\nfunc f() {\n\tnet.Listen("tcp", ' + UPSTREAM.replace(" ", "\n\t\t") + ")\n}\n"
    patched = patch_source(text, GRPC, path="adapters/handlers/grpc/server.go")
    assert (
        'net.Listen("tcp", lookuplabnet.JoinHostPort(lookuplabos.Getenv("GRPC_BIND_HOST"), fmt.Sprint(\n'
        "\t\tstate.ServerConfig.Config.GRPC.Port)))\n"
    ) in patched


@pytest.mark.parametrize(
    "text, reason",
    [
        ("package grpc\n\nvar a = " + UPSTREAM.replace('":%d", ', '"%s:%d", h, '), "found 0"),
        ('package grpc\n\nvar a = fmt.Sprintf(":%d", cfg.GRPC.Port)\n', "found 0"),
        (f"package grpc\n\nvar a, b = {UPSTREAM}, {UPSTREAM}\n", "found 2"),
        (f"var a = {UPSTREAM}\n", "package"),
    ],
    ids=["host already given", "other expression", "twice", "no package clause"],
)
def test_unexpected_text_raises_naming_the_file(text, reason):
    with pytest.raises(WeaviateSetupError, match=r"adapters/handlers/grpc/server\.go: expected") as info:
        patch_source(text, GRPC, path="adapters/handlers/grpc/server.go")
    assert reason in str(info.value)


def test_patched_text_is_not_patched_twice(upstream):
    once = patch_source((upstream / GRPC.path).read_text(encoding="utf-8"), GRPC, path=GRPC.path)
    with pytest.raises(WeaviateSetupError, match="found 0"):
        patch_source(once, GRPC, path=GRPC.path)


def test_the_overlay_maps_the_files_the_build_sees_to_patched_copies(upstream, tmp_path):
    overlay = write_overlay(upstream, tmp_path / "weaviate", tmp_path)
    replace = json.loads(overlay.read_text())["Replace"]
    assert sorted(replace) == sorted(str(tmp_path / "weaviate" / p.path) for p in PATCHES)
    for patch in PATCHES:
        assert f'"{patch.env}"' in Path(replace[str(tmp_path / "weaviate" / patch.path)]).read_text()
        assert f'"{patch.env}"' not in (upstream / patch.path).read_text()  # the module cache is untouched


def test_an_upstream_file_that_is_missing_is_named(tmp_path):
    with pytest.raises(WeaviateSetupError, match=r"adapters/handlers/grpc/server\.go: cannot read"):
        write_overlay(tmp_path / "module", tmp_path / "weaviate", tmp_path / "work")


def test_the_binary_sits_where_the_client_looks_and_is_named_for_the_patch(tmp_path):
    path = binary_path(tmp_path, "1.38.11")
    assert path.parent == tmp_path / PATCH_TAG and PATCH_TAG.startswith("bind-host-")
    path.parent.mkdir()
    path.write_bytes(b"")  # present, so the client does not try to download one
    client = EmbeddedV4(EmbeddedOptions(binary_path=str(path.parent), persistence_data_path=str(tmp_path), version="1.38.11"))
    client.ensure_weaviate_binary_exists()
    assert client._weaviate_binary_path == path


def test_the_patch_tag_changes_with_the_patch():
    import retrieval.engine.build as build

    other = (*PATCHES[:-1], ListenPatch(PATCHES[-1].path, PATCHES[-1].port, "SOME_OTHER_HOST"))
    assert other != PATCHES and repr(other) != repr(PATCHES)
    assert build.PATCH_TAG == build.patch_tag(PATCHES) != build.patch_tag(other)


def test_the_built_binary_is_patched(base_settings, tmp_path):
    check_patched(embedded_binary(base_settings))
    unpatched = tmp_path / "weaviate"
    unpatched.write_bytes(b"\x7fELF listens on :50051 GRPC_PORT CLUSTER_DATA_BIND_PORT")
    with pytest.raises(WeaviateSetupError, match="CLUSTER_DATA_BIND_HOST, GRPC_BIND_HOST"):
        check_patched(unpatched)
