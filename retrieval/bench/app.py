"""`python -m retrieval bench`, what the app costs its user: the model's load and query-embedding times, and a real
`streamlit run app.py` in headless chromium: its memory after one lookup, each page's first and warm load, a cold start.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from retrieval.bench import synthetic
from retrieval.bench.common import pct
from retrieval.bench.script_runs import IDLE, submit_text, watch_runs
from retrieval.bench.server import EVAL_SETS, _served_env
from retrieval.config import REPO_ROOT, Settings
from retrieval.core.corpus import load_corpus
from retrieval.engine.ports import free_port
from retrieval.errors import ScriptRunError
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.store.embedding import Embedder
from retrieval.store.factory import knowledge_store
from retrieval.types.models import ModelSpec

CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/setup.sh --browser); Playwright cannot download one here
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run", "--disable-sync"]
APP_QUERY = "PostgreSQL replication lag on the standby"
SESSION_TAG = "bench-app"
WAIT_S = 180.0  # the upper bound of each wait on the app; none waits for time to pass


class AppBenchError(RuntimeError):
    """The app could not be started or driven to a lookup; the message says which step and why."""


def probe_queries(count: int, *, seed: int) -> list[str]:
    """`count` distinct query texts: the sample eval sets' queries, then synthetic ones."""
    texts = [c.query for name in EVAL_SETS for c in load_eval_set(REPO_ROOT / "eval_sets" / name).cases]
    if len(set(texts)) < count:
        texts += synthetic.make_queries(synthetic.make_entries(200, seed=seed), count, seed=seed, exclude=set(texts))
    return list(dict.fromkeys(texts))[:count]


def model_figures(model: str | ModelSpec, *, model_dir: Path | None, queries: Sequence[str]) -> tuple[Embedder, dict[str, Any]]:
    """A fresh Embedder, and its load time and single-query embedding times (`embed_query` on distinct texts,
    so none comes from its cache; the first call, which sets up the session's buffers, is reported apart)."""
    if len(set(queries)) != len(queries) or len(queries) < 2:
        raise ValueError("the query-embedding probe needs at least two distinct texts")
    probe = Embedder(model, model_dir=model_dir)
    times = []
    for text in queries:
        t0 = time.perf_counter()
        probe.embed_query(text)
        times.append((time.perf_counter() - t0) * 1000)
    return probe, {
        "name": probe.name,
        "load_s": round(probe.load_s, 3),
        "query_embed": {
            "queries": len(times) - 1,
            "first_ms": round(times[0], 3),
            "p50_ms": pct(times[1:], 50),
            "p95_ms": pct(times[1:], 95),
        },
    }


def rss_mb(pid: int) -> dict[str, float] | None:
    """Current (VmRSS) and peak (VmHWM) resident set of a process, or None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith(("VmHWM", "VmRSS"))}
    return {"now_mb": round(kib["VmRSS"] / 1024, 1), "peak_mb": round(kib["VmHWM"] / 1024, 1)} if len(kib) == 2 else None


def _start_app(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen:
    """`streamlit run app.py`, headless on 127.0.0.1:`port`, once /_stcore/health answers ok."""
    args = ["--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1"]
    args += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    with open(log_path, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", *args],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as resp:
            if resp.read().decode().strip() == "ok":
                return proc
        time.sleep(0.3)
    _stop(proc)
    tail = log_path.read_text(errors="replace")[-2000:]
    raise AppBenchError(f"streamlit did not answer /_stcore/health (exit code {proc.returncode}):\n{tail}")


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM, as a service manager stops it; SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


PAGE_VISITS = {  # the pages the walk opens, each twice (the second is the warm figure), after the first lookup
    "Lookup from a URL": "?q=",
    "Invocations": "invocations",
    "Runs": "runs",
    "Sweep": "sweep",
    "Evaluate": "evaluate",
    "Filter comparison": "filter_comparison",
    "Corpus": "corpus",
}
TITLES = {"Lookup from a URL": "Lookup"}
GOAL_FIRST_PAGE_S = 5.0  # from the server's start (health answering) to the first page drawn, Weaviate still starting
GOAL_WARM_PAGE_S = 2.0  # a page opened again, from the request to the end of its script run


def _page_s(page, url: str, title: str) -> float:
    """Seconds from asking for `url` to the end of its first script run (its title drawn, the run over)."""
    t0 = time.perf_counter()
    page.goto(url)
    page.locator('[data-testid="stMain"] h1').filter(has_text=title).first.wait_for()
    page.wait_for_function(IDLE)
    return round(time.perf_counter() - t0, 2)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


@contextlib.contextmanager
def _chromium_page() -> Iterator[Any]:
    """A page of a headless chromium at 1280 x 800, every wait bounded by WAIT_S; the browser is closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            watch_runs(page)
            page.set_default_timeout(WAIT_S * 1000)
            yield page
        finally:
            browser.close()


def _walk_in_browser(url: str, query: str, pid: int) -> dict[str, Any]:
    """The first page (from asking for it, the server answering its health check already), then `query` typed on
    Lookup and Enter (an explicit, recorded run of lookup_knowledge) with the app process's RSS once that run has
    finished, then every page of PAGE_VISITS opened twice: each figure with the 1-minute load beside it."""
    from playwright.sync_api import Error as PlaywrightError

    out: dict[str, Any] = {}
    try:
        with _chromium_page() as page:
            # the app's first script run; the browser's own start is not the app's time
            out["first_page"] = {"s": _page_s(page, url, "Lookup"), "loadavg": _load()}
            submit_text(page.get_by_label("Query", exact=True), query, timeout_ms=WAIT_S * 1000)
            page.get_by_text(re.compile(r"^L1 candidates: ")).first.wait_for()  # the folded candidate tables
            shown = page.locator('[data-testid="stException"]')
            if shown.count():
                raise AppBenchError(f"the Lookup page showed an exception: {shown.first.inner_text()[:500]}")
            out["rss"] = rss_mb(pid)
            pages = {}
            for name, path in PAGE_VISITS.items():
                target = url + (path + quote_plus(query) if path == "?q=" else path)
                first = _page_s(page, target, TITLES.get(name, name))
                warm = _page_s(page, target, TITLES.get(name, name))
                pages[name] = {"first_s": first, "warm_s": warm, "loadavg": _load()}
                if page.locator('[data-testid="stException"]').count():
                    raise AppBenchError(f"the {name} page showed an exception")
            out["pages"] = pages
            return out
    except (PlaywrightError, ScriptRunError) as exc:
        raise AppBenchError(f"driving chromium through the app failed: {exc}") from exc


def cold_first_page(settings: Settings, corpus_dir: Path, *, workdir: Path) -> dict[str, Any]:
    """The default a user starts: the app with an embedded Weaviate of its own, starting cold (a fresh data
    directory on free ports). Seconds from the server's start (health answering) to the first page drawn, and to
    the sidebar's "L1 connected" once Weaviate is up; None and `why` without the Weaviate binary."""
    from playwright.sync_api import Error as PlaywrightError

    from retrieval.engine.server import embedded_binary

    if not embedded_binary(settings).is_file():
        return {"s": None, "why": f"no Weaviate binary at {embedded_binary(settings)} (scripts/setup.sh builds it)"}
    home = workdir / "cold"
    home.mkdir(parents=True, exist_ok=True)
    env = _served_env(settings.with_(weaviate_url=None, remote_grpc_port=None), home, "data")
    env.update(
        LOOKUP_CONFIG=str(home / "no-lookup.yaml"),
        LOOKUP_CORPUS_DIR=str(corpus_dir),
        LOOKUP_WEAVIATE_PORT=str(free_port()),
        LOOKUP_WEAVIATE_GRPC_PORT=str(free_port()),
    )
    env.pop("LOOKUP_WEAVIATE_URL", None)
    env.pop("LOOKUP_WEAVIATE_REMOTE_GRPC_PORT", None)
    env.pop("LOOKUP_COLLECTION", None)
    port = free_port()
    proc: subprocess.Popen | None = None
    try:
        with _chromium_page() as page:  # the browser first: its own start is not the app's time
            spawned = time.perf_counter()
            proc = _start_app(env, port, home / "streamlit.log")
            started = time.perf_counter()
            _page_s(page, f"http://127.0.0.1:{port}/", "Lookup")
            first = round(time.perf_counter() - started, 2)
            load = _load()
            page.locator('[data-testid="stSidebar"]').get_by_text("L1 connected").wait_for()
            connected = round(time.perf_counter() - started, 2)
    except PlaywrightError as exc:
        return {"s": None, "why": f"driving chromium to the first page failed: {exc}"}
    finally:
        if proc is not None:
            _stop(proc)
    return {"s": first, "l1_connected_s": connected, "server_start_s": round(started - spawned, 2), "loadavg": load}


APP_ENTRIES = 1000  # the bench's 1k corpus: synthetic entries with short bodies, written as markdown


def app_memory(
    settings: Settings,
    client,
    embedder: Embedder,
    *,
    workdir: Path,
    run_id: str,
    log: Callable[[str], None],
    entries: int = APP_ENTRIES,
    seed: int = 7,
) -> dict[str, Any]:
    """The app on `entries` synthetic entries, in a collection of its own in the bench's Weaviate (`settings`: URL or ports):
    RSS after one lookup, each page's first and warm load, a cold start's first page. A missing chromium or Playwright, or
    a failing app, gives `rss_mb` None and `why`; the collection is dropped at the end."""
    if not Path(CHROMIUM).is_file():
        return {"rss_mb": None, "why": f"{CHROMIUM} is missing: scripts/setup.sh --browser installs Debian's chromium"}
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return {"rss_mb": None, "why": f"Playwright is not installed ({exc})"}
    embedded = settings
    if not settings.weaviate_url:
        settings = settings.with_(
            weaviate_url=f"http://127.0.0.1:{settings.embedded_port}", remote_grpc_port=settings.embedded_grpc_port
        )
    home = workdir / "app"
    home.mkdir(parents=True, exist_ok=True)
    corpus_dir = synthetic.write_corpus(synthetic.make_entries(entries, seed=seed, body=synthetic.SHORT), home / "kb")
    settings = settings.with_(corpus_dir=corpus_dir, collection=f"Bench_app_{run_id}", session_tag=SESSION_TAG)
    corpus = load_corpus(corpus_dir)
    store = knowledge_store(client, settings)
    proc: subprocess.Popen | None = None
    out: dict[str, Any] = {"query": APP_QUERY, "entries": len(corpus.entries), "collection": settings.collection}
    try:
        store.drop()
        log(f"app: indexing {len(corpus.entries)} synthetic entries in {settings.collection}")
        indexing.ingest(store, corpus, embedder)
        env = _served_env(settings, home, "data")
        env["LOOKUP_CONFIG"] = str(home / "no-lookup.yaml")  # no ./lookup.yaml: only the bench's settings
        port = free_port()
        log(f"app: streamlit run app.py on 127.0.0.1:{port}; the first page, one lookup, every page twice in chromium")
        t0 = time.perf_counter()
        proc = _start_app(env, port, home / "streamlit.log")
        out["pid"] = proc.pid
        walk = _walk_in_browser(f"http://127.0.0.1:{port}/", APP_QUERY, proc.pid)
        out["seconds_to_walk"] = round(time.perf_counter() - t0, 1)
        measured = walk["rss"]
        if measured is None:
            raise AppBenchError(f"the app process ({proc.pid}) was gone before its RSS was read")
        out.update(rss_mb=measured["now_mb"], peak_mb=measured["peak_mb"])
        out.update(first_page=walk["first_page"], pages=walk["pages"])
        out["exit_code"] = _stop(proc)
        # The recorded row proves that the server process ran lookup_knowledge (its spool is adopted here).
        recorder = InvocationStore(Path(env["LOOKUP_DB_PATH"]))
        out["recorded"] = recorder.count(SESSION_TAG)
        recorder.close()
        log("app: a cold start of the embedded default (its own Weaviate), the first page")
        out["cold_first_page"] = cold_first_page(embedded, corpus_dir, workdir=home)
    except AppBenchError as exc:
        log(f"app: no memory figure: {exc}")
        out.update(rss_mb=None, why=str(exc))
    finally:
        if proc is not None:
            _stop(proc)
        with contextlib.suppress(Exception):  # clean-up must not hide the run's own error
            store.drop()
        shutil.rmtree(home, ignore_errors=True)
    out["loadavg"] = round(os.getloadavg()[0], 2)
    return out
