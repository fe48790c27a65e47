"""Where the embedding models' files come from (the catalogue itself is retrieval.types.models): an ONNX file and its
`tokenizer.json` from a langchain4j Maven jar, fetched by Maven's client at setup (`python -m retrieval models fetch`)
into the model cache, or put in a folder by hand and named by `LOOKUP_MODEL_DIR`; nothing is downloaded at run time.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import ModelError
from retrieval.types.models import MAVEN_GROUP, MAVEN_VERSION, ModelSpec


def cache_dir() -> Path:
    """Where unpacked model files live: ~/.cache/lookup-lab/models/<name>/."""
    return Path.home() / ".cache" / "lookup-lab" / "models"


def maven_jar(spec: ModelSpec) -> Path:
    """Where Maven's client puts the model's jar."""
    group = MAVEN_GROUP.replace(".", "/")
    repo = Path.home() / ".m2" / "repository"
    return repo / group / spec.artifact_id / MAVEN_VERSION / f"{spec.artifact_id}-{MAVEN_VERSION}.jar"


@dataclass(frozen=True)
class ModelFiles:
    onnx: Path
    tokenizer: Path


def _in(folder: Path, spec: ModelSpec) -> ModelFiles | None:
    files = ModelFiles(folder / spec.onnx_file, folder / spec.tokenizer_file)
    return files if files.onnx.is_file() and files.tokenizer.is_file() else None


def installed(spec: ModelSpec, model_dir: Path | None = None) -> bool:
    """The model's two files are in `model_dir`, the cache, or a fetched jar."""
    return any(
        (
            model_dir is not None and _in(model_dir, spec) is not None,
            _in(cache_dir() / spec.name, spec) is not None,
            maven_jar(spec).is_file(),
        )
    )


def locate(spec: ModelSpec, model_dir: Path | None = None) -> ModelFiles:
    """The model's files: from `model_dir` (LOOKUP_MODEL_DIR) when set, else the cache, unpacking the
    fetched jar into it when needed. Raises ModelError naming the artifact and how to provide the files."""
    if model_dir is not None:
        found = _in(model_dir, spec)
        if found is None:
            raise ModelError(
                f"model_dir (LOOKUP_MODEL_DIR) {model_dir}: {spec.onnx_file} and {spec.tokenizer_file} of "
                f"{spec.name} are not both there"
            )
        return found
    target = cache_dir() / spec.name
    found = _in(target, spec)
    if found is not None:
        return found
    jar = maven_jar(spec)
    if not jar.is_file():
        raise ModelError(missing_message(spec))
    return unpack(spec, jar, target)


def missing_message(spec: ModelSpec, why: str = "") -> str:
    return (
        f"the files of embedding model {spec.name} are not installed{': ' + why if why else ''}. "
        f"Run `python -m retrieval models fetch {spec.name}` (it fetches the Maven artifact {spec.artifact} "
        f"with `mvn`), or put {spec.onnx_file} and {spec.tokenizer_file} from that artifact's jar in a folder "
        f"and set LOOKUP_MODEL_DIR to it"
    )


def unpack(spec: ModelSpec, jar: Path, target: Path) -> ModelFiles:
    """Copy the ONNX and tokenizer files out of the jar into `target` (atomically, file by file)."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(jar) as zf:
            for name in (spec.onnx_file, spec.tokenizer_file):
                tmp = target / f".{name}.part"
                with zf.open(name) as src, tmp.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                tmp.replace(target / name)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ModelError(missing_message(spec, f"{jar} cannot be unpacked ({exc})")) from exc
    return ModelFiles(target / spec.onnx_file, target / spec.tokenizer_file)


def fetch(spec: ModelSpec, *, mvn: str | None = None) -> ModelFiles:
    """Fetch the model's jar with Maven (checksummed by Maven) unless it or the unpacked files are there, and
    unpack it (`locate`)."""
    if _in(cache_dir() / spec.name, spec) is None and not maven_jar(spec).is_file():
        exe = mvn or shutil.which("mvn")
        if exe is None:
            raise ModelError(missing_message(spec, "Maven (`mvn`) is not installed: `apt-get install maven` brings it"))
        cmd = [exe, "-q", "-B", "dependency:get", f"-Dartifact={spec.artifact}", "-Dtransitive=false"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not maven_jar(spec).is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise ModelError(missing_message(spec, f"`mvn dependency:get` failed: {' '.join(tail) or done.returncode}"))
    return locate(spec)
