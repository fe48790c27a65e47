"""Building the Weaviate server from its Go module, patched so that its gRPC and cluster data ports bind to the host in
GRPC_BIND_HOST / CLUSTER_DATA_BIND_HOST (upstream binds every interface), through `go build -overlay` (docs/operations.md).
Run as `python -m retrieval.engine.build path|build VERSION BIN_DIR` (scripts/setup.sh does).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import astuple, dataclass
from pathlib import Path

from retrieval.errors import WeaviateSetupError

MODULE = "github.com/weaviate/weaviate"
MAIN_PACKAGE = "./cmd/weaviate-server"


@dataclass(frozen=True)
class ListenPatch:
    """One listener: the file (inside the module), the port expression of its `fmt.Sprintf(":%d", <port>)`
    and the environment variable naming its host."""

    path: str
    port: str
    env: str


PATCHES = (
    ListenPatch("adapters/handlers/grpc/server.go", "state.ServerConfig.Config.GRPC.Port", "GRPC_BIND_HOST"),
    # The cluster data port: an HTTP/2 server that also carries the internal gRPC API ...
    ListenPatch("adapters/handlers/rest/clusterapi/serve.go", "port", "CLUSTER_DATA_BIND_HOST"),
    # ... and the stand-alone listener of that gRPC API (not started by v1.38.11; patched so that it never binds wider).
    ListenPatch(
        "adapters/handlers/rest/clusterapi/grpc/server.go",
        "s.state.ServerConfig.Config.Cluster.DataBindPort",
        "CLUSTER_DATA_BIND_HOST",
    ),
)
BIND_HOST_VARS = tuple(sorted({p.env for p in PATCHES}))

# The one host every port of a server the project starts listens on (docs/operations.md, "Listening addresses"),
# and the environment its launchers (weaviate_server, cluster) give the binary besides `--host BIND_HOST` for HTTP:
# gossip and Raft follow CLUSTER_BIND_ADDR, gRPC and the cluster data port the patch's variables, and the profiler
# (which listens on *:6060) is off.
BIND_HOST = "127.0.0.1"
BIND_ENV = {
    "CLUSTER_ADVERTISE_ADDR": BIND_HOST,
    "CLUSTER_BIND_ADDR": BIND_HOST,
    **dict.fromkeys(BIND_HOST_VARS, BIND_HOST),
    "GO_PROFILING_DISABLE": "true",
}

IMPORTS = (
    "\n\n// Lookup Lab: listen on the host of an environment variable (retrieval/engine/build.py)."
    '\nimport (\n\tlookuplabnet "net"\n\tlookuplabos "os"\n)'
)
REPLACEMENT = 'lookuplabnet.JoinHostPort(lookuplabos.Getenv("{env}"), fmt.Sprint({space}{port}))'


def patch_tag(patches: tuple[ListenPatch, ...]) -> str:
    """The name of the built binary's directory: it changes whenever the patch does."""
    spec = repr((IMPORTS, REPLACEMENT, [astuple(p) for p in patches]))
    return "bind-host-" + hashlib.sha256(spec.encode("utf-8")).hexdigest()[:8]


PATCH_TAG = patch_tag(PATCHES)


def patch_source(text: str, patch: ListenPatch, *, path: str) -> str:
    """The Go source `text` of `path` with its one `fmt.Sprintf(":%d", <patch.port>)` bound to the host of
    `patch.env`. Raises WeaviateSetupError naming the file when the expected text is not there exactly once."""
    pattern = re.compile(r'fmt\.Sprintf\(":%d",(\s*)' + re.escape(patch.port) + r"\)")
    found = pattern.findall(text)
    if len(found) != 1:
        raise WeaviateSetupError(
            f'{path}: expected exactly one `fmt.Sprintf(":%d", {patch.port})` to bind to ${patch.env}, found '
            f"{len(found)}; this Weaviate version's source differs from the one the patch was written for "
            "(retrieval/engine/build.py, PATCHES)"
        )
    package = re.compile(r"^package \w+[ \t]*$", re.MULTILINE)
    if len(package.findall(text)) != 1:
        raise WeaviateSetupError(f"{path}: expected one `package` clause to add the patch's imports after")

    def bound(m: re.Match[str]) -> str:  # a line break before the port stays where it was
        return REPLACEMENT.format(env=patch.env, space=m.group(1) if "\n" in m.group(1) else "", port=patch.port)

    text = pattern.sub(bound, text)
    return package.sub(lambda m: m.group(0) + IMPORTS, text, count=1)


def client_file_name(version: str) -> str:
    """The file name weaviate-client's embedded mode looks for in its binary_path."""
    tag = "v" + version.lstrip("v")
    return f"weaviate-{tag}-{hashlib.sha256(tag.encode('utf-8')).hexdigest()}"


def binary_path(bin_dir: Path, version: str) -> Path:
    """Where the patched server binary of `version` lives under `bin_dir`."""
    return Path(bin_dir) / PATCH_TAG / client_file_name(version)


def write_overlay(module_dir: Path, source_root: Path, work_dir: Path) -> Path:
    """Patched copies of the PATCHES files of `module_dir` in `work_dir`, and the overlay file mapping each
    file as the build sees it (under `source_root`) to its copy. Returns the overlay file's path."""
    replace = {}
    for patch in PATCHES:
        original = Path(module_dir) / patch.path
        try:
            text = original.read_text(encoding="utf-8")
        except OSError as exc:
            raise WeaviateSetupError(f"{original}: cannot read the file to patch ({exc.strerror})") from exc
        target = Path(work_dir) / "patched" / patch.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(patch_source(text, patch, path=str(original)), encoding="utf-8")
        replace[str(Path(source_root) / patch.path)] = str(target)
    overlay = Path(work_dir) / "overlay.json"
    overlay.write_text(json.dumps({"Replace": replace}, indent=2), encoding="utf-8")
    return overlay


def _go(args: list[str], *, env: dict[str, str], cwd: Path, capture: bool = False) -> str:
    try:
        done = subprocess.run(["go", *args], env=env, cwd=cwd, check=False, text=True, capture_output=capture)
    except FileNotFoundError:
        raise WeaviateSetupError(
            "Go is needed to build the Weaviate server (or set LOOKUP_WEAVIATE_URL to use an existing one)"
        ) from None
    if done.returncode != 0:
        detail = f": {(done.stderr or done.stdout or '').strip()[-2000:]}" if capture else " (its output is above)"
        raise WeaviateSetupError(f"`go {' '.join(args)}` failed with exit code {done.returncode}{detail}")
    return done.stdout or ""


def module_dir(version: str, *, env: dict[str, str], cwd: Path) -> Path:
    """The module's directory in the Go module cache (downloaded, and checksum-verified, if missing)."""
    out = _go(["mod", "download", "-json", f"{MODULE}@v{version.lstrip('v')}"], env=env, cwd=cwd, capture=True)
    info = json.loads(out)
    if info.get("Error") or not info.get("Dir"):
        raise WeaviateSetupError(f"go mod download {MODULE}@v{version}: {info.get('Error') or 'no directory'}")
    return Path(info["Dir"])


def build(version: str, bin_dir: Path) -> Path:
    """Build the patched server of `version` into `binary_path(bin_dir, version)` unless it is there already."""
    target = binary_path(bin_dir, version)
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="lookup-lab-weaviate-build-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false", "GOWORK": "off"}
        module = module_dir(version, env=env, cwd=work)
        # The module as seen through a symlink outside GOMODCACHE; PWD keeps Go on that path (os.Getwd).
        source_root = work / "weaviate"
        source_root.symlink_to(module, target_is_directory=True)
        overlay = write_overlay(module, source_root, work)
        built = work / "weaviate-server"
        flags = ["-overlay", str(overlay), "-trimpath", "-ldflags=-s -w", "-o", str(built), MAIN_PACKAGE]
        _go(["build", *flags], env={**env, "PWD": str(source_root)}, cwd=source_root)
        check_patched(built)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".tmp")
        shutil.move(built, partial)
        partial.replace(target)
    return target


def check_patched(binary: Path) -> None:
    """Raise unless `binary` holds the patch's variable names (a build that missed the overlay does not)."""
    data = binary.read_bytes()
    missing = [name for name in BIND_HOST_VARS if name.encode() not in data]
    if missing:
        raise WeaviateSetupError(f"{binary}: built without the bind-host patch (no {', '.join(missing)} in it)")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("path", "build"):
        print("usage: python -m retrieval.engine.build path|build VERSION BIN_DIR", file=sys.stderr)
        return 2
    command, version, bin_dir = argv
    if command == "path":
        print(binary_path(Path(bin_dir), version))
        return 0
    try:
        print(build(version, Path(bin_dir)))
    except WeaviateSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
