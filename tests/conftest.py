"""Shared fixtures: a real embedded Weaviate on a free port with a temporary data directory, the real
embedding model, and temporary DuckDB files. Nothing here is mocked."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from retrieval.config import REPO_ROOT, Settings, child_environment, load_settings
from retrieval.core.corpus import load_corpus
from retrieval.engine.ports import free_port
from retrieval.store import indexing

from .helpers.default_ports import default_ports_in, held_by_run, mark_run

# ../shared beside the repo: corpora and eval sets kept outside it. LOOKUP_TEST_SHARED_DIR points the tests
# elsewhere (the tests of needs_shared itself use it to simulate a missing folder).
SHARED = Path(os.environ.get("LOOKUP_TEST_SHARED_DIR") or REPO_ROOT.parent / "shared")
RUNBOOKS = SHARED / "corpora" / "runbooks"
RUNBOOKS_EVAL = SHARED / "eval_sets" / "runbooks-alert-summaries.yaml"
KUBEVIRT = SHARED / "corpora" / "kubevirt"
KUBEVIRT_EVAL = SHARED / "eval_sets" / "kubevirt-alert-summaries.yaml"
SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"
# Debian's chromium (scripts/setup.sh --browser), which the browser tests drive with Playwright. LOOKUP_TEST_CHROMIUM
# points them elsewhere (the tests of needs_chromium use it to simulate a missing browser).
CHROMIUM = Path(os.environ.get("LOOKUP_TEST_CHROMIUM") or "/usr/bin/chromium")


def ci_enabled(value: str | None) -> bool:
    """CI=true (or 1, yes), as CI services set it."""
    return (value or "").strip().lower() in ("1", "true", "yes")


def shared_verdict(missing: Sequence[Path], *, ci: str | None) -> tuple[str, str] | None:
    """What a test that reads ../shared does when some of it is missing: None (run), ("fail", why) under CI,
    where a silent skip would hide that the tests did not run, or ("skip", why) on a developer's machine."""
    if not missing:
        return None
    names = ", ".join(str(p) for p in missing)
    if ci_enabled(ci):
        return "fail", (
            f"CI=true but ../shared (corpora and eval sets beside the repository) is missing here "
            f"({names}): CI must run the tests that read it, not skip them"
        )
    return "skip", f"needs ../shared beside the repository, which is missing here ({names}); under CI=true this fails"


def needs_shared(*paths: Path) -> None:
    """Call first in a test (or fixture) that reads ../shared: fails under CI=true, skips otherwise, naming
    what is missing. Without arguments: the runbooks corpus and its eval set."""
    wanted = paths or (RUNBOOKS, RUNBOOKS_EVAL)
    act_on(shared_verdict([p for p in wanted if not p.exists()], ci=os.environ.get("CI")))


def chromium_verdict(chromium: Path, *, ci: str | None) -> tuple[str, str] | None:
    """What a browser test does when its chromium is missing, as shared_verdict does for ../shared: None (run),
    ("fail", why) under CI, ("skip", why) on a developer's machine."""
    if chromium.is_file():
        return None
    install = "scripts/setup.sh --browser installs Debian's chromium"
    if ci_enabled(ci):
        return "fail", f"CI=true but {chromium} is missing ({install}): CI must run the browser tests, not skip them"
    return "skip", f"needs {chromium}, which is missing here ({install}); under CI=true this fails"


def needs_chromium(chromium: Path = CHROMIUM) -> None:
    """Call first in a test (or fixture) that opens chromium: fails under CI=true, skips otherwise, naming it."""
    act_on(chromium_verdict(chromium, ci=os.environ.get("CI")))


def act_on(verdict: tuple[str, str] | None) -> None:
    """Carry out a verdict of shared_verdict or chromium_verdict: nothing, pytest.fail or pytest.skip with its why."""
    if verdict is None:
        return
    action, why = verdict
    if action == "fail":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


RUN = mark_run()  # before any server starts: every process of the run inherits it


@pytest.fixture(autouse=True)
def no_default_ports():
    """After each test: no process of this run listens on a port of the app's defaults (APP_PORTS), which belong to
    whoever runs the app here (a test server on 8079 once answered a user's app). Tests draw ports (free_port)."""
    yield
    held = held_by_run(RUN)
    if held:
        pytest.fail(f"a test server holds a default port of the app: {'; '.join(held)}; draw ports with free_port()")


@pytest.fixture(scope="session")
def base_settings(tmp_path_factory) -> Settings:
    """Settings for the test session's own embedded Weaviate (free ports, temporary data)."""
    data = tmp_path_factory.mktemp("lookup-data")
    env = child_environment()
    settings = load_settings(
        env=env,
        config_file=None,
        data_dir=data,
        embedded_port=free_port(),
        embedded_grpc_port=free_port(),
        corpus_dir=SAMPLE_CORPUS,
    )
    assert not default_ports_in(settings), default_ports_in(settings)
    return settings


@pytest.fixture(scope="session")
def weaviate_client(base_settings):
    from retrieval.engine.server import connect

    client = connect(base_settings)
    yield client
    client.close()


@pytest.fixture
def store(weaviate_client, request):
    """An empty collection of its own for one test (named after it), dropped after."""
    from retrieval.store.weaviate_store import KnowledgeStore

    s = KnowledgeStore(weaviate_client, "T" + request.node.name.replace("_", "")[:40].title().replace("[", "").replace("]", ""))
    s.drop()
    yield s
    s.drop()


@pytest.fixture(scope="session")
def embedder():
    from retrieval.store.embedding import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def sample_corpus():
    return load_corpus(SAMPLE_CORPUS)


@pytest.fixture(scope="session")
def sample_store(weaviate_client, embedder, sample_corpus):
    """The sample corpus indexed once for the session in collection 'TestSample'."""
    from retrieval.store.weaviate_store import KnowledgeStore

    store = KnowledgeStore(weaviate_client, "TestSample")
    store.drop()
    indexing.ingest(store, sample_corpus, embedder)
    return store


@pytest.fixture(scope="session")
def runbooks_corpus():
    needs_shared()
    return load_corpus(RUNBOOKS)


@pytest.fixture(scope="session")
def runbooks_store(weaviate_client, embedder, runbooks_corpus):
    from retrieval.store.weaviate_store import KnowledgeStore

    store = KnowledgeStore(weaviate_client, "TestRunbooks")
    store.drop()
    indexing.ingest(store, runbooks_corpus, embedder)
    return store


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "invocations.duckdb"


@pytest.fixture
def cli_env(tmp_path, base_settings, sample_store):
    """Point the CLI at the test session's running Weaviate by URL, and at a temporary store."""
    return {
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_WEAVIATE_URL": f"http://127.0.0.1:{base_settings.embedded_port}",
        "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": str(base_settings.embedded_grpc_port),
        "LOOKUP_COLLECTION": "TestSample",
        "LOOKUP_CORPUS_DIR": str(SAMPLE_CORPUS),
    }
