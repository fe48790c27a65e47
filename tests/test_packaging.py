"""The wheel: every package, the console script and the sample corpus are in it (scripts/check-wheel.sh runs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from retrieval import config
from retrieval.config import REPO_ROOT

from .helpers.source_files import NOT_SOURCE

CORPUS_DATA = "share/lookup-lab/sample_corpus"  # where pyproject.toml's data-files put the corpus, below <prefix>


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel pip builds, from a copy of the source (a build in place would leave build/ and egg-info)."""
    work = tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO_ROOT, work / "src", ignore=NOT_SOURCE)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(work / "dist"), str(work / "src")],
        check=True,
        timeout=300,
    )
    (built,) = (work / "dist").glob("lookup_lab-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def _packages(top: str) -> list[Path]:
    return sorted(p.parent.relative_to(REPO_ROOT) for p in (REPO_ROOT / top).rglob("__init__.py"))


@pytest.mark.parametrize("top", ["retrieval", "app_support"])
def test_wheel_holds_every_package_and_module(wheel, top):
    names = set(wheel.namelist())
    packages = _packages(top)
    assert Path(top) in packages
    for package in packages:
        modules = [m.relative_to(REPO_ROOT).as_posix() for m in (REPO_ROOT / package).glob("*.py")]
        missing = [m for m in modules if m not in names]
        assert not missing, f"package {package.as_posix()} is not all in the wheel: {missing}"


def test_wheel_holds_the_sample_corpus(wheel):
    names = set(wheel.namelist())
    (dist_info,) = {n.split("/", 1)[0] for n in names if n.endswith(".dist-info/WHEEL")}
    data = dist_info.removesuffix(".dist-info") + ".data"  # the wheel's folder of files installed below <prefix>
    corpus = REPO_ROOT / "sample_corpus"
    files = sorted(f.relative_to(corpus).as_posix() for f in corpus.rglob("*") if f.is_file())
    assert len(files) >= 48
    missing = [f for f in files if f"{data}/data/{CORPUS_DATA}/{f}" not in names]
    assert not missing, f"sample_corpus files missing from the wheel (add their folder to pyproject's data-files): {missing}"


def test_wheel_has_the_console_script(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "lookup-lab = retrieval.cli:main" in text


def test_installed_corpus_is_looked_for_where_the_wheel_puts_it():
    schemes = (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user"))
    assert config._installed_sample_corpus() in [Path(sysconfig.get_path("data", s)) / CORPUS_DATA for s in schemes]


def test_a_checkout_keeps_its_defaults():
    assert config.IN_CHECKOUT
    assert (config.DEFAULT_CORPUS_DIR, config.DEFAULT_DATA_DIR) == (REPO_ROOT / "sample_corpus", REPO_ROOT / ".lookup-lab")


def test_the_readme_is_short_and_opens_with_the_two_commands():
    """A newcomer reads it in five minutes: at most 200 lines, the two commands (set up and run the app; set up and
    pass the tests, which .ci/run calls) within its first 40."""
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move measured tables and history to docs/"
    head = "\n".join(lines[:40])
    assert "bash scripts/run-app.sh" in head and "bash scripts/test.sh" in head
    assert "scripts/test.sh" in (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
