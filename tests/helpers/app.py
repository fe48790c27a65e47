"""The app under AppTest: the page files, opening a page, and reading what it shows."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from retrieval.config import REPO_ROOT

APP = str(REPO_ROOT / "app.py")


PAGES = {
    "Lookup": "pages/lookup.py",
    "Filter comparison": "pages/filter_comparison.py",
    "Evaluate": "pages/evaluate.py",
    "Invocations": "pages/invocations.py",
    "Traffic": "pages/traffic.py",
    "Corpus": "pages/corpus.py",
}


SAMPLE_EVAL = "eval_sets/sample-ops-alerts.yaml"


def point_app_at(
    monkeypatch, tmp_path: Path, *, url: str, grpc_port: int | None, collection: str = "TestSample", corpus: Path | None = None
) -> None:
    for name in [n for n in os.environ if n.startswith("LOOKUP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOOKUP_CONFIG", str(tmp_path / "no-lookup.yaml"))  # ignore a developer's ./lookup.yaml
    monkeypatch.setenv("LOOKUP_WEAVIATE_URL", url)
    if grpc_port is not None:
        monkeypatch.setenv("LOOKUP_WEAVIATE_REMOTE_GRPC_PORT", str(grpc_port))
    monkeypatch.setenv("LOOKUP_COLLECTION", collection)
    monkeypatch.setenv("LOOKUP_APP_L1_WAIT_S", "300")  # AppTest reads a page as one run: the frame waits for Weaviate
    monkeypatch.setenv("LOOKUP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LOOKUP_DB_PATH", str(tmp_path / "invocations.duckdb"))
    if corpus is not None:
        monkeypatch.setenv("LOOKUP_CORPUS_DIR", str(corpus))


def open_app(page: str = "Lookup", **query_params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)  # a ceiling on waiting for the script run to end, for busy machines
    for name, value in query_params.items():
        at.query_params[name] = value
    at.run()
    if page != "Lookup":
        at.switch_page(PAGES[page]).run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    from app_support.render import UNEXPECTED

    assert not at.exception, [e.value for e in at.exception]
    assert not [e.value for e in at.error if UNEXPECTED in e.value]


def texts(elements) -> list[str]:
    """Element texts as people read them: the app backslash-escapes user and corpus text in Markdown."""
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def texts_of(cells) -> list[str]:
    """st.table cells as people read them (corpus text is Markdown-escaped there)."""
    return [re.sub(r"\\(.)", r"\1", str(v)) for v in cells]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def plotly_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def html_bodies(at: AppTest) -> list[str]:
    return [el.proto.body for el in at.get("html")]


def results_table(at: AppTest):
    """The Lookup page's results (the table with a source column), wherever the page puts it."""
    return next(t.value for t in at.table if "source" in t.value.columns)


def candidates_table(at: AppTest):
    """The Lookup page's vector (or hybrid) candidates (the table with a distance column)."""
    return next(t.value for t in at.table if "distance" in t.value.columns)


def dataframe_with(at: AppTest, *columns: str):
    """The first st.dataframe that has these columns (a page's order of tables is its own business)."""
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def in_order(node) -> list:
    """The elements under an AppTest block as the page shows them, top to bottom (blocks walked depth first)."""
    children = getattr(node, "children", None)
    if children is None:
        return [node]
    return [e for i in sorted(children) for e in in_order(children[i])]
