"""Every page of the app with Streamlit's AppTest, against the session's real embedded Weaviate (conftest),
the real embedding model and a temporary DuckDB file. The app finds them through LOOKUP_* variables."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import textwrap
import threading
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import NumberInput, Slider, Toggle

from app_support.keys import URL_KEYS
from app_support.setting_widgets import BY_FIELD, WIDGETS, url_params
from retrieval.config import REPO_ROOT, Settings, load_settings
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.core.search_request import SearchRequest
from retrieval.core.text import tokens
from retrieval.evals.catalog import known_corpora
from retrieval.evals.evaluation import CONFIGS
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore
from retrieval.store import indexing
from retrieval.types.modes import SearchMode

from ..conftest import RUNBOOKS_EVAL, free_port, needs_shared
from ..helpers.app import (  # noqa: F401
    APP,
    PAGES,
    SAMPLE_EVAL,
    assert_clean,
    candidates_table,
    dataframe_with,
    html_bodies,
    in_order,
    metrics,
    open_app,
    plotly_specs,
    point_app_at,
    results_table,
    texts,
    texts_of,
)
from ..helpers.app_fixtures import MINILM
from ..helpers.processes import wait_until

NV = SearchMode.NEAR_VECTOR


# --- every page ----------------------------------------------------------------------------------------------
KEY_WIDGETS = {
    "Lookup": [("text_input", "q")],
    "Filter comparison": [("text_input", "cq"), ("selectbox", "eval")],
    "Evaluate": [("selectbox", "es"), ("multiselect", "eval_configs-True"), ("button", "run_eval")],
    "Invocations": [
        ("selectbox", "sql_example"),
        ("text_area", "sql_text"),
        ("number_input", "sql_rows"),
        ("number_input", "sql_timeout_ms"),
        ("button", "sql_run"),
    ],
    "Corpus": [("button", "corpus_ingest"), ("button", "corpus_reindex"), ("selectbox", "entry")],
    "Traffic": [],  # no calls recorded here: the page says so before its window (tests/app/test_traffic_page.py)
}


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_with_its_key_widgets(app_env, page):
    at = open_app(page)
    # the shared frame: settings in the sidebar, connection status, no L1 banner (Weaviate is up)
    for kind, key in [
        ("selectbox", "corpus"),
        ("selectbox", "model"),
        ("number_input", "k"),
        ("toggle", "l1"),
        ("radio", "mode"),
    ]:
        assert getattr(at, kind)(key=key) is not None
    assert any("L1 connected" in t for t in texts(at.sidebar.markdown))
    assert any("TestSample" in t and "48 of 48 entries indexed" in t for t in texts(at.sidebar.caption))
    assert not [w for w in texts(at.warning) if "L1 unavailable" in w]
    for kind, key in KEY_WIDGETS[page]:
        assert getattr(at, kind)(key=key) is not None, (kind, key)
    title = at.title[0].value
    assert page in title


def test_lookup_shows_hint_panels_routing_candidates_results_latency_and_record(app_env):
    at = open_app()
    at.text_input(key="q").input("PostgreSQL replication lag on the standby").run()
    assert_clean(at)
    assert metrics(at)["Layer"] == "L0+L1"
    md = " ".join(texts(at.markdown))
    for panel in ("Matched titles", "Keywords", "Domains", "Entities"):
        assert panel in md
    assert "PostgreSQL" in md  # an entity, listed
    # matched keywords as the entries write them, the normalised match key beside each
    keywords = dataframe_with(at, "term", "field")
    assert list(keywords.columns) == ["term", "field", "weight", "key"]
    assert ("PostgreSQL replication", "title", "postgr sql replication") in set(
        zip(keywords["term"], keywords["field"], keywords["key"], strict=True)
    )
    assert "postgr sql replication" not in set(keywords["term"])
    # the matched words are highlighted, in the query and in the matched title, as escaped HTML
    bodies = html_bodies(at)
    assert any("<mark" in b and "replication" in b and "standby" in b for b in bodies)
    assert any("<mark" in b and "lag</mark>" in b for b in bodies[1:])
    assert any("one domain: databases → L1 filtered on category = databases" in t for t in texts(at.info))
    candidates, results = candidates_table(at), results_table(at)
    assert len(candidates) and set(candidates["domain"]) == {"databases"}
    assert candidates["distance"].astype(float).is_monotonic_increasing
    assert results.iloc[0]["entry_id"] == "databases/PostgresReplicationLag"
    assert results.iloc[0]["source"] == "both"
    assert "why here" not in results.columns  # a list under the table: in the table it squeezed every row
    why = next(t for t in texts(at.markdown) if t.startswith("**Why here**")).split("**#1** ")[1].split(": ", 1)[1]
    assert why.startswith("vector #") and "score = " in why and "scaled to this query" in why  # which signals placed it
    assert any("Relevance" in t for t in texts(at.success) + texts(at.info) + texts(at.warning))
    assert md.startswith("### PostgreSQL replication") or "### PostgreSQL replication" in md  # the answer heads the page
    stages = {t["name"].split(" ")[0] for spec in plotly_specs(at) for t in spec["data"]}
    assert {"L0", "embedding", "L1", "fuse", "recording"} <= stages
    record = at.json[0].proto.body
    stored = json.loads(record)
    assert stored["input"] == "PostgreSQL replication lag on the standby"
    assert stored["layer"] == "L0+L1" and stored["retrieval_details"]["l0"]["domains"] == ["databases"]
    # a rerun of the same view does not record the lookup again
    at.run()
    assert json.loads(at.json[0].proto.body)["id"] == stored["id"]
    assert InvocationStore(app_env / "invocations.duckdb").count() == 1


def test_opening_a_lookup_url_records_nothing_an_explicit_run_records(app_env):
    store = InvocationStore(app_env / "invocations.duckdb")
    at = open_app(q="etcd cluster has no leader")  # a shared link, "Open in Lookup"
    assert metrics(at)["Layer"] == "L0+L1" and len(results_table(at))  # the view is there ...
    assert any("Not recorded" in t for t in texts(at.caption))  # ... and says it was not recorded
    at.run()
    open_app(q="etcd cluster has no leader")  # a refresh: a new session on the same URL
    at.number_input(key="k").set_value(3).run()  # a setting changed: shown again, not recorded
    assert len(results_table(at)) == 3
    assert store.count() == 0
    at.button(key="lookup_run").click().run()  # Run again
    assert store.count() == 1
    assert json.loads(at.json[0].proto.body)["input"] == "etcd cluster has no leader"  # read back
    assert not any("Not recorded" in t for t in texts(at.caption))
    at.run()
    at.text_input(key="q").input("Vault is sealed").run()  # Enter on a new query
    assert store.count() == 2
    at.run()
    assert store.count() == 2


def test_lookup_shows_what_the_filter_kept_out_and_links_to_the_comparison(app_env):
    at = open_app(q="Pod keeps restarting", k="10")  # more than the 8 kubernetes entries: others are in reach
    assert_clean(at)
    assert any("category = kubernetes" in t for t in texts(at.info))
    assert any("Kept out by the filter" in t for t in texts(at.markdown))
    kept_out = dataframe_with(at, "unfiltered rank")
    assert list(kept_out.columns) == ["unfiltered rank", "entry_id", "title", "domain", "similarity"]
    assert len(kept_out) and "kubernetes" not in set(kept_out["domain"])
    assert not set(kept_out["entry_id"]) & set(results_table(at)["entry_id"])  # not among the results
    assert kept_out["unfiltered rank"].is_monotonic_increasing and kept_out["unfiltered rank"].max() <= 10
    (link,) = [p for p in at.get("page_link") if "Compare filtered" in p.proto.label]
    assert dict(parse_qsl(link.proto.query_string)) == {"cq": "Pod keeps restarting", "k": "10", "ck": "fusion"}
    compared = open_app("Filter comparison", **dict(parse_qsl(link.proto.query_string)))  # opens in the lookup's mode
    assert compared.get("button_group")[0].value == "fusion"
    assert any(t.startswith("**fusion**: the lookup's L1 ranking") for t in texts(compared.caption))
    # no filter, no such block
    other = open_app(q="something unrelated happened somewhere")
    assert not any("Kept out by the filter" in t for t in texts(other.markdown))


def test_lookup_before_the_first_ingest_says_so_and_ingests_in_place(monkeypatch, tmp_path, base_settings, weaviate_client):
    from retrieval.store.weaviate_store import KnowledgeStore

    KnowledgeStore(weaviate_client, "TestLookupUnindexed").drop()
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        collection="TestLookupUnindexed",
    )
    at = open_app(q="Vault is sealed")
    shown = texts(at.warning) + texts(at.error) + texts(at.caption)
    assert any("Collection TestLookupUnindexed is not indexed yet" in t for t in texts(at.warning))
    assert not [t for t in shown if "WeaviateQueryError" in t or "could not find class" in t]
    assert metrics(at)["Layer"] == "L0" and results_table(at).iloc[0]["entry_id"] == "security/VaultSealed"
    assert any(p.proto.page_script_hash for p in at.get("page_link") if "Corpus" in p.proto.label)
    at.button(key="ingest_for_lookup").click().run()  # ingest in place, then the lookup runs on L1 too
    assert_clean(at)
    assert not any("is not indexed yet" in t for t in texts(at.warning))
    assert metrics(at)["Layer"] == "L0+L1"
    assert KnowledgeStore(weaviate_client, "TestLookupUnindexed").count_chunks() > 0
    KnowledgeStore(weaviate_client, "TestLookupUnindexed").drop()


def test_an_unanswerable_query_heads_with_the_verdict_and_the_nearest_entry(app_env):
    at = open_app()
    at.text_input(key="q").input("how do I bake sourdough bread with rye flour").run()
    assert_clean(at)
    (head,) = [t for t in texts(at.markdown) if t.startswith("### ")]
    assert head == "### No supported answer in the knowledge base"
    shown = [texts([e])[0] for e in in_order(at.main) if e.type in ("markdown", "warning", "info", "success")]
    first = shown.index(head)
    assert "semantic support: no" in shown[first + 1], shown[first : first + 3]  # the verdict, then the nearest entry
    assert shown[first + 2].startswith("The nearest entry: **"), shown[first : first + 3]


def test_lookup_escapes_user_text(app_env):
    at = open_app()
    at.text_input(key="q").input("<script>alert(1)</script> **vault** sealed [x](http://evil)").run()
    assert_clean(at)
    bodies = html_bodies(at)
    assert not any("<script>" in b for b in bodies)
    assert any("&lt;script&gt;" in b for b in bodies)
    assert any("<mark" in b and "vault</mark>" in b for b in bodies)


def test_query_params_restore_the_view(app_env):
    at = open_app(q="Vault is sealed", k="3", l1="false", mode="hybrid")
    assert at.text_input(key="q").value == "Vault is sealed"
    assert at.number_input(key="k").value == 3
    assert at.toggle(key="l1").value is False
    assert at.radio(key="mode").value == "hybrid"
    assert at.slider(key="alpha") is not None  # shown for hybrid
    m = metrics(at)
    assert (m["Layer"], m["L1 status"]) == ("L0", "disabled")
    results = results_table(at)
    assert results.iloc[0]["entry_id"] == "security/VaultSealed" and len(results) <= 3
    # and another URL gives another view
    other = open_app(q="Pod keeps restarting", k="2")
    assert metrics(other)["Layer"] == "L0+L1"
    assert len(results_table(other)) == 2  # two results at k=2 (L1 fetches candidate_depth candidates for the fusion)
    assert any("category = kubernetes" in t for t in texts(other.info))


def test_sidebar_mode_and_model_reach_the_settings_the_lookup_runs_with(monkeypatch, tmp_path, base_settings, minilm_sample):
    """The base says hybrid and the default model, the collection derived (no LOOKUP_COLLECTION). Fusion and
    MiniLM picked in the sidebar: the recorded lookup ran in fusion with MiniLM on MiniLM's own collection."""
    store, model = minilm_sample
    point_app_at(
        monkeypatch, tmp_path, url=f"http://127.0.0.1:{base_settings.embedded_port}", grpc_port=base_settings.embedded_grpc_port
    )
    monkeypatch.delenv("LOOKUP_COLLECTION")
    monkeypatch.setenv("LOOKUP_SEARCH_MODE", "hybrid")
    at = open_app()
    assert (at.radio(key="mode").value, at.selectbox(key="model").value) == ("hybrid", "bge-small-en-v1.5")
    assert at.selectbox(key="model").options == ["bge-small-en-v1.5", MINILM, "e5-small-v2"]
    assert "Collection **Kb_sample_corpus_bge_small**: 0 of 48 entries indexed, 0 chunks" in texts(at.sidebar.caption)
    at.radio(key="mode").set_value("fusion")
    at.selectbox(key="model").set_value(MINILM).run()
    assert_clean(at)
    assert not at.slider  # no alpha: fusion, not hybrid, is on screen
    assert any("Collection **Kb_sample_corpus_minilm**: 48 of 48 entries indexed" in t for t in texts(at.sidebar.caption))
    assert store.name == "Kb_sample_corpus_minilm"

    query = "Pod keeps restarting"
    at.text_input(key="q").input(query).run()  # Enter: the lookup is recorded with what it ran with
    assert_clean(at)
    assert InvocationStore(tmp_path / "invocations.duckdb").count() == 1
    details = json.loads(at.json[0].proto.body)["retrieval_details"]  # the record, read back from the store
    l1 = details["l1"]
    assert details["embedding_model"] == MINILM
    assert (l1["mode"], l1["status"]) == ("fusion", "ok")
    assert l1["lexical"]  # the BM25F query of fusion ran; hybrid makes none
    # the vector candidates are MiniLM's query vector against MiniLM's collection, distances and all
    direct = store.search(SearchRequest(NV, len(l1["candidates"]), model.embed_query(query), category=l1["filter"]["category"]))
    assert [(c["entry_id"], c["distance"]) for c in l1["candidates"]] == [(c.entry_id, round(c.distance, 5)) for c in direct]
    # and a link made from these settings carries them
    (link,) = [p for p in at.get("page_link") if "Compare filtered" in p.proto.label]
    assert dict(parse_qsl(link.proto.query_string)) == {"cq": query, "ck": "fusion", "model": MINILM, "mode": "fusion"}

    # the URL reopens the same choices
    again = open_app(q=query, model=MINILM, mode="fusion")
    assert (again.radio(key="mode").value, again.selectbox(key="model").value) == ("fusion", MINILM)
    assert any("Collection **Kb_sample_corpus_minilm**: 48 of 48" in t for t in texts(again.sidebar.caption))


def sidebar_widget(at: AppTest, key: str):
    """The sidebar widget with this key, whatever its kind."""
    kinds = ("selectbox", "radio", "number_input", "toggle", "slider")
    found = [w for kind in kinds for w in at.sidebar.get(kind) if w.key == key]
    assert len(found) == 1, (key, found)
    return found[0]


def another_value(widget) -> object:
    """A value the widget can take other than the one it shows."""
    if isinstance(widget, Toggle):
        return not widget.value
    if isinstance(widget, NumberInput | Slider):
        return widget.min if widget.value != widget.min else widget.max
    return next(option for option in widget.options if option != widget.value)


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda w: w.key)
def test_every_sidebar_choice_reaches_the_settings_the_lookup_runs_with(
    monkeypatch, tmp_path, base_settings, sample_store, sample_corpus, widget
):
    """Each row of setting_widgets.WIDGETS, set in the sidebar to a value other than the base's: the lookup runs
    with it in the row's field, and a link built from those settings opens the same choice again. A new widget
    is tested by adding its row."""
    assert widget.key in URL_KEYS  # bound to the URL
    corpus = tmp_path / "kb"  # a copy of the sample corpus, so the corpus widget has another choice to pick
    shutil.copytree(sample_corpus.root, corpus)
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        corpus=corpus,
    )
    base = load_settings()
    ran = []  # the settings each lookup's options are built from
    options = Settings.options

    def spy(settings):
        ran.append(settings)
        return options(settings)

    monkeypatch.setattr(Settings, "options", spy)
    needs = {}  # what puts the widget on screen (hybrid alpha: the hybrid mode)
    if widget.only_when is not None:
        other = BY_FIELD[widget.only_when[0]]
        needs[other.key] = other.to_param(widget.only_when[1])
    at = open_app(**needs)
    element = sidebar_widget(at, widget.key)
    value = another_value(element)
    element.set_value(value).run()
    at.text_input(key="q").input("Vault is sealed").run()
    assert_clean(at)

    # the field's value; the corpus is picked by label: that choice's folder
    folder = {c.label: c.path for c in known_corpora(base)}.get(str(value))
    expected = folder if widget.parse is None else widget.parse(value)
    assert expected != getattr(base, widget.field)
    assert getattr(ran[-1], widget.field) == expected
    # a link made from these settings carries the choice, and opens it again (the browser writes the widgets'
    # own URL, which AppTest does not see)
    params = url_params(ran[-1], base, corpus_label=str(value) if widget.parse is None else None)
    assert widget.key in params, params
    ran.clear()
    again = open_app(q="Vault is sealed", **params)
    assert sidebar_widget(again, widget.key).value == value
    assert getattr(ran[-1], widget.field) == expected


def test_a_corpus_picked_with_a_model_takes_that_models_collection(monkeypatch, tmp_path, base_settings, minilm_sample):
    """The configured corpus is another folder: the sample corpus, picked in the sidebar with MiniLM, is
    searched in its MiniLM collection, not the default model's."""
    corpus = tmp_path / "tiny"
    (corpus / "net").mkdir(parents=True)
    (corpus / "net" / "PacketLoss.md").write_text("---\ntitle: Packet loss between zones\n---\nLoss over 2 percent.\n")
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        corpus=corpus,
    )
    monkeypatch.delenv("LOOKUP_COLLECTION")
    at = open_app()
    assert "Collection **Kb_tiny_bge_small**: 0 of 1 entries indexed, 0 chunks" in texts(at.sidebar.caption)
    at.selectbox(key="corpus").set_value("sample_corpus")
    at.selectbox(key="model").set_value(MINILM).run()
    assert_clean(at)
    assert any("Collection **Kb_sample_corpus_minilm**: 48 of 48 entries indexed" in t for t in texts(at.sidebar.caption))
    at.text_input(key="q").input("Vault is sealed").run()
    assert_clean(at)
    details = json.loads(at.json[0].proto.body)["retrieval_details"]
    assert details["embedding_model"] == MINILM and details["l1"]["status"] == "ok"
    assert results_table(at).iloc[0]["entry_id"] == "security/VaultSealed"


def test_an_empty_query_gets_a_hint_not_a_lookup(app_env):
    at = open_app()
    assert any("Type a question" in t for t in texts(at.info))
    at.text_input(key="q").input("   ").run()
    assert any("Type a question" in t for t in texts(at.info))


def test_dead_weaviate_lookup_answers_from_l0_with_a_banner(monkeypatch, tmp_path):
    point_app_at(monkeypatch, tmp_path, url=f"http://127.0.0.1:{free_port()}", grpc_port=free_port())
    monkeypatch.setenv("LOOKUP_L1_TIMEOUT_S", "2")
    at = open_app(q="Vault is sealed")
    banners = [w for w in texts(at.warning) if "L1 unavailable" in w]
    assert banners and "cannot reach" in banners[0]
    assert at.button(key="retry_connection") is not None
    m = metrics(at)
    assert (m["Layer"], m["L1 status"]) == ("L0", "unavailable")
    assert results_table(at).iloc[0]["entry_id"] == "security/VaultSealed"
    assert any("no semantic support" in t.lower() or "semantic support: no" in t for t in texts(at.warning))
    at.button(key="lookup_run").click().run()  # recorded on an explicit run
    assert json.loads(at.json[0].proto.body)["l1_status"] == "unavailable"
    # the other pages still render, and say what L1 would be needed for
    for page in ("Filter comparison", "Corpus", "Invocations", "Evaluate"):
        at.switch_page(PAGES[page]).run()
        assert_clean(at)
        assert [w for w in texts(at.warning) if "L1 unavailable" in w]
    assert at.multiselect(key="eval_configs-False").value == ["l0_only"]  # Evaluate offers what runs without L1
    at.switch_page(PAGES["Corpus"]).run()
    assert at.button(key="corpus_ingest").disabled
    at.button(key="retry_connection").click().run()  # still down: the banner stays, nothing breaks
    assert_clean(at)
    assert [w for w in texts(at.warning) if "L1 unavailable" in w]


class TcpForward:
    """A plain TCP forwarder on 127.0.0.1:<port> to a target port: a Weaviate that can be 'down' (not listening)
    and then come up on the same address, without touching the real server."""

    def __init__(self, port: int, target: int) -> None:
        self.port, self.target = port, target
        self.server: socket.socket | None = None

    def start(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):  # the other side may have closed it already
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def test_retry_connection_recovers_without_a_restart(monkeypatch, tmp_path, base_settings, sample_store):
    http, grpc = TcpForward(free_port(), base_settings.embedded_port), TcpForward(free_port(), base_settings.embedded_grpc_port)
    point_app_at(monkeypatch, tmp_path, url=f"http://127.0.0.1:{http.port}", grpc_port=grpc.port)
    monkeypatch.setenv("LOOKUP_L1_TIMEOUT_S", "2")
    at = open_app(q="Vault is sealed")  # nothing listens yet
    assert [w for w in texts(at.warning) if "L1 unavailable" in w]
    assert metrics(at)["L1 status"] == "unavailable"
    http.start()
    grpc.start()
    try:
        at.run()  # the failure is remembered (no waiting on a dead server every rerun) ...
        assert [w for w in texts(at.warning) if "L1 unavailable" in w]
        at.button(key="retry_connection").click().run()  # ... until Retry connection
        assert_clean(at)
        assert not [w for w in texts(at.warning) if "L1 unavailable" in w]
        assert any("L1 connected" in t for t in texts(at.sidebar.markdown))
        assert (metrics(at)["Layer"], metrics(at)["L1 status"]) == ("L0+L1", "ok")
    finally:
        from app_support import resources

        resources.clear_all()  # close the client before the forwarder goes
        http.stop()
        grpc.stop()


def test_the_api_key_is_never_shown(monkeypatch, tmp_path):
    secret = "sekret-api-key-4711"
    point_app_at(monkeypatch, tmp_path, url=f"http://user:{secret}@127.0.0.1:{free_port()}", grpc_port=free_port())
    monkeypatch.setenv("LOOKUP_WEAVIATE_API_KEY", secret)
    monkeypatch.setenv("LOOKUP_L1_TIMEOUT_S", "2")
    at = open_app(q="Vault is sealed")
    assert [w for w in texts(at.warning) if "L1 unavailable" in w]
    for page in PAGES:
        at.switch_page(PAGES[page]).run()
        shown = (
            [
                e.value
                for kind in ("markdown", "caption", "warning", "error", "info", "success", "title")
                for e in getattr(at, kind)
            ]
            + [j.proto.body for j in at.json]
            + html_bodies(at)
        )
        assert shown and not [t for t in shown if secret in t], page


def test_filter_comparison_for_one_query(app_env):
    at = open_app("Filter comparison")
    at.text_input(key="cq").input("Pod keeps restarting").run()
    assert_clean(at)
    assert any("category = kubernetes" in t for t in texts(at.info))
    m = metrics(at)
    assert {"Overlap", "Removed by the filter", "Let in by the filter"} <= set(m)
    filtered, unfiltered = at.dataframe[0].value, at.dataframe[1].value
    assert {e.split("/")[0] for e in filtered["entry_id"]} == {"kubernetes"}  # an entry id starts with its domain
    assert len(unfiltered) == 5 and unfiltered["distance"].notna().all()
    assert int(m["Removed by the filter"]) == len(set(unfiltered["entry_id"]) - set(filtered["entry_id"]))
    spec = plotly_specs(at)[0]
    assert {t.get("name") for t in spec["data"]} >= {"filtered", "unfiltered"}


def test_filter_comparison_of_the_bm25_query(app_env):
    """The L1 query picker: bm25 compares Weaviate's BM25F query, whose scores are not 1 - distance."""
    at = open_app("Filter comparison")
    at.segmented_control(key="ck").set_value("bm25").run()
    at.text_input(key="cq").input("Pod keeps restarting").run()
    assert_clean(at)
    assert any("BM25F" in t for t in texts(at.caption))
    filtered, unfiltered = at.dataframe[0].value, at.dataframe[1].value
    assert {e.split("/")[0] for e in filtered["entry_id"]} == {
        "kubernetes"
    }  # an entry id starts with its domain and len(unfiltered) == 5
    assert (unfiltered["score"] > 1).any()  # BM25F scores, not cosine similarities
    assert unfiltered["distance"].isna().all()  # a BM25F query has no vector distance


def test_filter_comparison_on_an_eval_set(app_env):
    at = open_app("Filter comparison", eval=SAMPLE_EVAL)
    assert at.selectbox(key="eval").value == SAMPLE_EVAL
    at.button(key="run_set_comparison").click().run()
    assert_clean(at)
    m = metrics(at)
    counts = {v: int(m[v]) for v in ("Helped", "Hurt", "No change", "Not applied")}
    cases = [c for c in load_eval_set(REPO_ROOT / SAMPLE_EVAL).cases if c.answerable]
    assert sum(counts.values()) == len(cases)
    assert counts["Not applied"] < len(cases)  # the filter applied somewhere
    changed = [t for t in texts(at.caption) if "The filter changed the reciprocal rank" in t]
    assert changed and "only those are drawn" in changed[0]
    n_changed = int(re.search(r"\) of (\d+) of", changed[0]).group(1))
    if n_changed:  # the ΔRR chart draws the changed cases only
        drawn = [x for t in plotly_specs(at)[-1]["data"] if t["type"] == "bar" for x in t["x"]]  # case ids
        assert len(drawn) == n_changed
    assert len(at.get("page_link")) == counts["Hurt"]
    # the results stay on a rerun without running again
    at.run()
    assert {v: int(metrics(at)[v]) for v in counts} == counts
    # and when a setting changes, marked, until the next run
    at.radio(key="mode").set_value("hybrid").run()
    assert {v: int(metrics(at)[v]) for v in counts} == counts
    (stale,) = [w for w in texts(at.warning) if "Settings changed — run again" in w]
    assert "search mode" in stale and "→ hybrid" in stale


def test_hurt_cases_link_into_lookup(app_env, monkeypatch, sample_corpus, sample_store, embedder, base_settings):
    """An eval set with one case the filter must hurt: its expected entry is one the filter removes."""
    import retrieval.evals.catalog as catalog
    from app_support import eval_ui
    from retrieval.evals.comparison import compare_filter

    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)
    for query in (
        "Pod keeps restarting",
        "Pod is crash looping.",
        "Node disk is filling up",
        "Vault is sealed",
        "PostgreSQL replication lag on the standby",
        "Kafka consumer lag is growing",
    ):
        cmp = compare_filter(query, services, base_settings.with_(collection="TestSample", top_k=4))
        if cmp.category is not None and cmp.removed:
            break
    assert cmp.category is not None and cmp.removed, "no query of the list is filtered away from a top-4 hit"
    path = app_env / "hurt.yaml"
    path.write_text(
        json.dumps(
            {
                "name": "hurt-once",
                "corpus": str(REPO_ROOT / "sample_corpus"),
                "cases": [
                    {"id": "Hurt1", "query": query, "expected": [cmp.removed[0]]},
                    {"id": "Kept", "query": query, "expected": [cmp.filtered[0].entry_id]},
                ],
            }
        )
    )
    listed = catalog.eval_set_files()
    monkeypatch.setattr(eval_ui, "eval_set_files", lambda **kw: [*listed, catalog.EvalSetFile("tmp/hurt.yaml", path)])

    at = open_app("Filter comparison", eval="tmp/hurt.yaml", k="4")
    at.button(key="run_set_comparison").click().run()
    assert_clean(at)
    m = metrics(at)
    assert (m["Hurt"], m["Not applied"]) == ("1", "0")
    (link,) = at.get("page_link")
    lookup_hash = next(h for h, info in at._registered_pages.items() if info["script_path"].endswith("lookup.py"))
    assert "Hurt1" in link.proto.label and link.proto.page_script_hash == lookup_hash
    assert dict(parse_qsl(link.proto.query_string)) == {"q": query, "k": "4", "mode": "near_vector"}  # as compared
    # Evaluate counts the same case as hurt, by the same definition (and the JSON says so)
    ev = open_app("Evaluate", es="tmp/hurt.yaml", k="4")
    ev.multiselect(key="eval_configs-True").set_value(["l1_unfiltered", "l1_filtered"]).run()
    ev.button(key="run_eval").click().run()
    assert_clean(ev)
    said = [t for t in texts(ev.markdown) if "Cases the filter hurt" in t]
    assert said and f"Cases the filter hurt** (1 of 2; helped {m['Helped']})" in said[0] and "lower reciprocal rank" in said[0]
    assert [p.proto.label.split(":")[0] for p in ev.get("page_link")] == ["Hurt1"]
    # following the link (its query parameters on the Lookup page) shows that query
    lookup = open_app(**dict(parse_qsl(link.proto.query_string)))
    assert lookup.text_input(key="q").value == query
    assert results_table(lookup).iloc[0]["entry_id"] != cmp.removed[0]


def add_eval_set(monkeypatch, path: Path, label: str) -> None:
    """List one more eval set file in the app's picker."""
    import retrieval.evals.catalog as catalog
    from app_support import eval_ui

    listed = catalog.eval_set_files()
    monkeypatch.setattr(eval_ui, "eval_set_files", lambda **kw: [*listed, catalog.EvalSetFile(label, path)])


@pytest.mark.parametrize("page, run_key", [("Filter comparison", "run_set_comparison"), ("Evaluate", "run_eval")])
def test_an_eval_set_fits_by_its_expected_ids_not_its_corpus_path(app_env, monkeypatch, page, run_key):
    """The set names the corpus through another path (here one that does not exist): its ids decide."""
    sample = load_eval_set(REPO_ROOT / SAMPLE_EVAL)
    cases = [c.to_dict() for c in sample.cases[:3]]
    elsewhere = app_env / "elsewhere.yaml"
    elsewhere.write_text(json.dumps({"name": "elsewhere", "corpus": str(app_env / "mounted" / "sample_corpus"), "cases": cases}))
    add_eval_set(monkeypatch, elsewhere, "tmp/elsewhere.yaml")
    at = open_app(page, eval="tmp/elsewhere.yaml", es="tmp/elsewhere.yaml")
    assert not [w for w in texts(at.warning) if "does not fit" in w]
    assert at.button(key=run_key) is not None and "switch_corpus" not in {b.key for b in at.button}
    # two expected ids the corpus does not have: refused, saying how many of how many
    partial = app_env / "partial.yaml"
    partial.write_text(
        json.dumps(
            {
                "name": "partial",
                "corpus": str(app_env / "mounted" / "sample_corpus"),
                "cases": [*cases, {"id": "gone", "query": "Something else", "expected": ["nowhere/Missing", "nowhere/Gone"]}],
            }
        )
    )
    add_eval_set(monkeypatch, partial, "tmp/partial.yaml")
    at = open_app(page, eval="tmp/partial.yaml", es="tmp/partial.yaml")
    (warning,) = [w for w in texts(at.warning) if "does not fit" in w]
    want = len({e for c in cases for e in c["expected"]}) + 2
    assert f"2 of its {want} expected entries are not in it" in warning and "nowhere/Gone" in warning
    assert run_key not in {b.key for b in at.button}


def test_eval_set_for_another_corpus_offers_to_switch(app_env):
    needs_shared()
    label = f"shared/eval_sets/{RUNBOOKS_EVAL.name}"
    at = open_app("Filter comparison", eval=label)
    warning = next(w for w in texts(at.warning) if "written for the corpus" in w)
    assert "runbooks" in warning
    at.button(key="switch_corpus").click().run()
    assert_clean(at)
    assert at.selectbox(key="corpus").value == "runbooks"
    assert any("runbooks" in t and "108 entries" in t for t in texts(at.sidebar.caption))
    # its own collection, derived from the folder name, not indexed in this test Weaviate: ingest is offered
    offer = [w for w in texts(at.warning) if "Kb_runbooks_bge_small" in w]
    assert offer and "holds 0 of 108" in offer[0]
    assert at.button(key="ingest_for_eval").label == "Ingest 108 entries into Kb_runbooks_bge_small"


def test_evaluate_runs_the_configurations_on_an_eval_set(app_env):
    at = open_app("Evaluate")
    assert at.selectbox(key="es").value == SAMPLE_EVAL  # preselected: written for the loaded corpus
    assert at.multiselect(key="eval_configs-True").value == [c for c in CONFIGS if c != "lookup"]  # lookup always runs
    at.multiselect(key="eval_configs-True").set_value(["l0_only", "l1_unfiltered", "l1_filtered"]).run()
    at.button(key="run_eval").click().run()
    assert_clean(at)
    table = at.table[0].value
    assert list(table.index) == ["l0_only", "l1_unfiltered", "l1_filtered", "lookup"]
    # three decimals everywhere, a blank where a figure does not apply, significance as a mark with a legend
    cells = [str(v) for v in table.to_numpy().ravel()]
    assert all(re.fullmatch(r"(\d\.\d{3}( [▲▼])?)?", v) for v in cells), cells
    assert "" in cells  # l0_only has no routing accuracy (nothing filtered)
    assert any("significantly higher / lower than lookup" in t for t in texts(at.caption))
    assert "fallback" in table.columns and "right + supported" in table.columns
    mrr = table["mrr@10"].map(lambda v: float(v.split(" ")[0]))
    assert ((mrr >= 0) & (mrr <= 1)).all() and mrr["lookup"] > mrr["l0_only"]
    assert {b.label for b in at.get("download_button")} == {"Download JSON", "Download HTML report"}
    # the settings of the run, as name=value, beside its figures; the significance against lookup, Holm-corrected
    (strip,) = [t for t in texts(at.markdown) if t.startswith("**Settings of this run**")]
    assert "`search_mode=fusion`" in strip and "`top_k=10`" in strip and "`embedding_model=" in strip
    assert "`support_threshold=" in strip and "`vector_weight=" in strip
    assert any("Holm-corrected over 12 tests" in t for t in texts(at.caption))
    # the support estimates: one point per case (all answerable) in a strip per outcome, the claim threshold drawn
    (support,) = [f for f in plotly_specs(at) if f["layout"]["title"]["text"].startswith("Support estimate")]
    drawn = {t["name"].split(" ")[0]: t.get("x", []) for t in support["data"]}
    assert sum(len(x) for x in drawn.values()) == 48 and drawn["wrong"] and drawn["right"] and not drawn["unanswerable"]
    (threshold,) = [shape["x0"] for shape in support["layout"]["shapes"]]
    claimed = sum(v >= threshold for x in drawn.values() for v in x)
    assert 0 < claimed < 48
    # the calibration: predicted hit@1 beside the measured one, the error, and the reliability diagram's bins
    (calibration,) = [t for t in texts(at.markdown) if t.startswith("**Calibration** of the support estimate")]
    (diagram,) = [f for f in plotly_specs(at) if f["layout"]["title"]["text"].startswith("Reliability")]
    bins = diagram["data"][1]
    assert sum(int(n) for n in bins["text"]) == 48 and all(0 <= v <= 1 for v in bins["x"] + bins["y"])
    hit1 = float(table["hit@1"]["lookup"].split(" ")[0])
    assert f"against measured **{hit1:.3f}**" in calibration and "expected calibration error **" in calibration
    assert any("read against" in t for t in texts(at.caption))  # which fit gave the estimates
    # the lookups were recorded under the run tag, 48 cases. The app's store appends to its spool and its
    # background flusher moves the rows into DuckDB every second; the spool it is appending to is its own
    # (another store of the process leaves it alone), so the last rows show within a flush or two.
    recorded = InvocationStore(app_env / "invocations.duckdb")
    wait_until(lambda: recorded.count() >= 48, 60, "the run's 48 rows are in DuckDB")
    tags = recorded.query("SELECT session_tag, count(*) AS n FROM tool_invocation GROUP BY ALL")
    assert len(tags) == 1 and tags["session_tag"][0].startswith("eval-sample-ops-alerts") and tags["n"][0] == 48
    # a setting changes: the results stay, marked, until the next run
    at.number_input(key="k").set_value(6).run()
    assert at.table[0].value.equals(table)
    (stale,) = [w for w in texts(at.warning) if "Settings changed — run again" in w]
    assert "top-k 5 → 6" in stale
    at.button(key="run_eval").click().run()
    assert not [w for w in texts(at.warning) if "Settings changed" in w]


def test_evaluate_names_the_lookup_for_the_mode_and_shows_the_next_runs_settings(app_env):
    at = open_app("Evaluate")
    (lookup,) = [t for t in texts(at.markdown) if t.startswith("**`lookup`** always runs")]
    assert "BM25F queries, fused" in lookup
    at.radio(key="mode").set_value("near_vector").run()
    assert_clean(at)
    (lookup,) = [t for t in texts(at.markdown) if t.startswith("**`lookup`** always runs")]
    assert "vector query, fused with L0" in lookup and "BM25F" not in lookup and "fusion" not in lookup
    assert "lookup" not in at.multiselect(key="eval_configs-True").options  # it cannot be left out
    (strip,) = [t for t in texts(at.markdown) if t.startswith("**The next run's settings**")]
    assert "`search_mode=near_vector`" in strip and "lexical_weight" not in strip and "`top_k=10`" in strip


def test_sql_console_refuses_drop_table_and_runs_a_select(app_env):
    at = open_app("Invocations")
    at.text_area(key="sql_text").input("DROP TABLE tool_invocation").run()
    at.button(key="sql_run").click().run()
    assert_clean(at)
    refused = [e for e in texts(at.error) if "Refused" in e]
    assert refused and "DROP" in refused[0] and "only SELECT or EXPLAIN" in refused[0]
    at.selectbox(key="sql_example").select("Calls per layer").run()
    assert at.text_area(key="sql_text").value.startswith("SELECT layer")
    at.button(key="sql_run").click().run()
    assert_clean(at)
    assert not [e for e in texts(at.error) if "Refused" in e]
    assert list(at.dataframe[-1].value.columns) == ["layer", "calls"]


def test_invocations_page_filters_charts_and_exports(app_env, sample_corpus, sample_store, embedder, base_settings):
    recorder = InvocationStore(app_env / "invocations.duckdb")
    settings = base_settings.with_(collection="TestSample", session_tag="seed")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
    lookup_knowledge("PostgreSQL replication lag on the standby", services, settings.options())
    lookup_knowledge("Pod keeps restarting", services, settings.options())
    gone = LookupServices(L0Index(sample_corpus.entries), None, None, recorder, l1_unavailable="cannot reach it")
    lookup_knowledge("Vault is sealed", gone, settings.with_(session_tag="other").options())
    recorder.close()

    at = open_app("Invocations")
    m = metrics(at)
    assert (m["Calls"], m["Fallbacks"], m["Fallback rate"]) == ("3", "1", "33%")
    titles = {spec["layout"]["title"]["text"] for spec in plotly_specs(at)}
    assert {"Latency per stage (ms)", "Top domains", "Top L0 keywords"} <= titles
    stages = next(spec for spec in plotly_specs(at) if spec["layout"]["title"]["text"] == "Latency per stage (ms)")
    assert stages["layout"]["yaxis"]["type"] == "log"  # an outlier does not squash the boxes
    top = next(spec for spec in plotly_specs(at) if spec["layout"]["title"]["text"] == "Top L0 keywords")
    shown = {v for trace in top["data"] for v in trace["y"]}
    assert "PostgreSQL replication" in shown and "postgr sql replication" not in shown  # as written, not the key
    assert any(t.startswith("Calls per") for t in titles) and any(t.startswith("Fallback rate") for t in titles)
    calls = at.dataframe[0].value
    assert len(calls) == 3
    assert list(calls.columns[:5]) == ["created_at", "input", "layer", "top_entry_id", "latency_ms"]  # id last
    assert {b.label for b in at.get("download_button")} == {"Download CSV", "Download Parquet"}

    at.checkbox(key="inv_fallback").check().run()
    assert metrics(at)["Calls"] == "1"
    assert at.dataframe[0].value.iloc[0]["input"] == "Vault is sealed"
    at.checkbox(key="inv_fallback").uncheck().run()
    at.text_input(key="inv_text").input("pod").run()
    assert metrics(at)["Calls"] == "1"
    at.text_input(key="inv_text").input("").run()
    at.multiselect(key="inv_sessions").select("other").run()
    assert metrics(at)["Calls"] == "1"
    at.multiselect(key="inv_sessions").unselect("other").select("seed").run()
    at.multiselect(key="inv_layers").select("L0+L1").run()
    assert metrics(at)["Calls"] == "2"
    at.multiselect(key="inv_domains").select("kubernetes").run()
    assert metrics(at)["Calls"] == "1"
    at.selectbox(key="inv_range").select("Last hour").run()
    assert metrics(at)["Calls"] == "1"
    assert_clean(at)


def test_the_top_keywords_chart_leaves_out_single_title_words_until_asked(app_env, sample_corpus, base_settings):
    recorder = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), recorder=recorder)
    for query in ("Vault is sealed", "the vault got sealed again", "sealed vault"):  # "sealed", "Vault": title words
        lookup_knowledge(query, services, base_settings.with_(l1_enabled=False).options())
    recorder.close()

    def single_title_words(at) -> set[str]:
        spec = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"] == "Top L0 keywords")
        return {v for trace in spec["data"] if trace["name"] in ("title", "name") for v in trace["y"] if len(tokens(v)) == 1}

    at = open_app("Invocations")
    assert not single_title_words(at)  # the chart leads with what tells something
    switch = at.toggle(key="inv_single_words")
    assert "sealed" in switch.help and "Vault" in switch.help  # and the switch names what it adds
    switch.set_value(True).run()
    assert {"sealed", "Vault"} <= single_title_words(at)
    assert_clean(at)


def test_invocations_page_samples_the_stage_chart_but_counts_every_call(app_env, sample_corpus, base_settings):
    from dataclasses import replace

    from retrieval.core.lookup import to_record
    from retrieval.core.record import new_invocation_id
    from retrieval.records.dashboard import SAMPLE_CALLS

    recorder = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), None, None, None, l1_unavailable="off")
    one = to_record(lookup_knowledge("Pod keeps restarting", services, base_settings.with_(l1_enabled=False).options()))
    n = SAMPLE_CALLS + 100
    for _ in range(n):
        recorder.record(replace(one, id=new_invocation_id()))
    recorder.close()

    at = open_app("Invocations")
    assert metrics(at)["Calls"] == f"{n:,}"
    assert any(f"counts all {n:,}" in c.value for c in at.caption)
    stages = next(d.value for d in at.dataframe if "p50_ms" in d.value.columns)
    assert list(stages["stage"]) == ["l0", "fuse"] and set(stages["calls"]) == {n}
    assert_clean(at)


def test_corpus_page_lists_entries_problems_and_ingests(monkeypatch, tmp_path, base_settings, weaviate_client):
    from retrieval.store.weaviate_store import KnowledgeStore

    corpus = tmp_path / "kb"
    (corpus / "net").mkdir(parents=True)
    (corpus / "net" / "DnsDown.md").write_text(
        textwrap.dedent("""\
        ---
        title: DNS resolution fails
        keywords: [dns, resolver]
        entities: [CoreDNS]
        ---
        Lookups time out; check the CoreDNS pods and the upstream resolver.
        """)
    )
    (corpus / "net" / "PacketLoss.md").write_text("---\ntitle: Packet loss between zones\n---\nLoss over 2 percent.\n")
    (corpus / "net" / "Broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    KnowledgeStore(weaviate_client, "TestAppIngest").drop()
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        collection="TestAppIngest",
        corpus=corpus,
    )
    at = open_app("Corpus")
    m = metrics(at)
    assert (m["Entries"], m["Indexed"], m["To (re)index"], m["Skipped files"]) == ("2", "0", "2", "1")
    entries = at.dataframe[0].value
    assert list(entries["entry_id"]) == ["net/DnsDown", "net/PacketLoss"]
    assert set(entries["indexed"]) == {"missing"} and list(entries["chunks"]) == [2, 2]  # a card and the body each
    assert "dns" in entries.iloc[0]["index_terms"]
    terms = at.dataframe[1].value  # the chosen entry's index terms, as the file writes them, with the key
    assert list(terms.columns) == ["term", "field", "weight", "key"]
    assert ("DNS resolution fails", "dns resolution fail") in set(zip(terms["term"], terms["key"], strict=True))
    problems = at.dataframe[-1].value
    assert problems.iloc[0]["path"].endswith("Broken.md") and "frontmatter" in problems.iloc[0]["reason"]
    assert json.loads(at.json[0].proto.body)["entities"] == ["CoreDNS"]
    assert "check the CoreDNS pods and the upstream resolver" in at.code[0].value  # the entry's text, not only its frontmatter

    at.button(key="corpus_ingest").click().run()
    assert_clean(at)
    assert any("Indexed" in s and "TestAppIngest" in s and "2 added" in s for s in texts(at.success))
    assert metrics(at)["Indexed"] == "2"
    assert set(at.dataframe[0].value["indexed"]) == {"indexed"}
    assert any("2 of 2 entries indexed" in t for t in texts(at.sidebar.caption))


# --- read-only -------------------------------------------------------------------------------------------------
WRITE_BUTTONS = ("corpus_ingest", "corpus_reindex", "corpus_reload")


def button_keys(at: AppTest) -> set[str]:
    return {b.key for b in at.button}


def read_only_badge(at: AppTest) -> bool:
    return any("Read-only" in t for t in texts(at.sidebar.markdown))


@pytest.mark.parametrize(
    "setting, address, read_only",
    [
        ("true", "127.0.0.1", True),  # LOOKUP_READ_ONLY=true
        (None, "0.0.0.0", True),  # unset, and the app listens beyond this machine
        (None, None, True),  # unset, and no address: Streamlit listens on every interface
        ("false", "0.0.0.0", False),  # said explicitly
        (None, "127.0.0.1", False),  # unset, on loopback: a developer's own app
    ],
)
def test_read_only_offers_no_write_and_says_so(app_env, monkeypatch, served_on, setting, address, read_only):
    if setting is not None:
        monkeypatch.setenv("LOOKUP_READ_ONLY", setting)
    served_on(address)
    at = open_app("Corpus")
    assert read_only_badge(at) is read_only
    if read_only:
        assert not set(WRITE_BUTTONS) & button_keys(at)
        assert any("Read-only" in t and "Ingest, Re-index and Reload are off" in t for t in texts(at.info))
        assert any("Ingest, Re-index and Reload are off" in t for t in texts(at.sidebar.caption))
    else:
        assert set(WRITE_BUTTONS) <= button_keys(at)
        assert at.button(key="corpus_ingest").disabled is False


def test_read_only_records_typed_lookups_only_when_told_and_refuses_sql_writes(app_env, monkeypatch):
    monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
    at = open_app(q="Vault is sealed")
    assert read_only_badge(at)
    at.button(key="lookup_run").click().run()  # read-only, recording not asked for: a demo leaves no trace
    assert any("the app is read-only and records no lookup" in t for t in texts(at.caption))
    assert InvocationStore(app_env / "invocations.duckdb").count() == 0
    monkeypatch.setenv("LOOKUP_READ_ONLY_RECORDS", "true")
    at = open_app(q="Vault is sealed")
    at.button(key="lookup_run").click().run()
    assert json.loads(at.json[0].proto.body)["input"] == "Vault is sealed"  # recorded, and read back
    assert InvocationStore(app_env / "invocations.duckdb").count() == 1
    at.switch_page(PAGES["Invocations"]).run()
    at.text_area(key="sql_text").input("DELETE FROM tool_invocation").run()
    at.button(key="sql_run").click().run()
    assert any("Refused" in e for e in texts(at.error))
    assert InvocationStore(app_env / "invocations.duckdb").count() == 1


def test_read_only_offers_no_ingest_for_an_eval_set(monkeypatch, tmp_path, base_settings, weaviate_client):
    """An empty collection for the sample corpus: Filter comparison and Evaluate offer to ingest it, unless read-only."""
    from retrieval.store.weaviate_store import KnowledgeStore

    KnowledgeStore(weaviate_client, "TestReadOnlyEmpty").drop()
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        collection="TestReadOnlyEmpty",
    )
    at = open_app("Filter comparison", eval=SAMPLE_EVAL)
    assert any("holds 0 of 48" in w for w in texts(at.warning))
    assert "ingest_for_eval" in button_keys(at)  # writable: offered
    monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
    for page, key in (("Filter comparison", "ingest_for_eval"), ("Evaluate", "ingest_for_run")):
        at = open_app(page, eval=SAMPLE_EVAL, es=SAMPLE_EVAL)
        assert any("holds 0 of 48" in w for w in texts(at.warning)), page
        assert key not in button_keys(at), page
        assert any("the app is read-only" in c for c in texts(at.caption)), page
    assert KnowledgeStore(weaviate_client, "TestReadOnlyEmpty").count_chunks() == 0


def test_an_index_that_lost_entries_says_so_and_offers_repair(monkeypatch, tmp_path, base_settings, weaviate_client, embedder):
    """An entry the index lost (a chunk deleted through the API, as a killed server loses what it had not saved):
    the sidebar, Corpus and Lookup say the index needs repair and how many entries are missing, and offer Repair,
    except when read-only; Repair brings the index back."""
    from weaviate.classes.query import Filter

    from retrieval.core.corpus import load_corpus
    from retrieval.store.weaviate_store import KnowledgeStore

    corpus = tmp_path / "kb"
    (corpus / "net").mkdir(parents=True)
    (corpus / "net" / "DnsDown.md").write_text(
        "---\ntitle: DNS resolution fails\nkeywords: [dns]\n---\nCheck the CoreDNS pods.\n"
    )
    (corpus / "net" / "PacketLoss.md").write_text("---\ntitle: Packet loss between zones\n---\nLoss over 2 percent.\n")
    store = KnowledgeStore(weaviate_client, "TestAppRepair")
    store.drop()
    indexing.ingest(store, load_corpus(corpus), embedder)
    store.collection.data.delete_many(
        where=Filter.by_property("entry_id").equal("net/DnsDown") & Filter.by_property("chunk_index").equal(0)
    )
    point_app_at(
        monkeypatch,
        tmp_path,
        url=f"http://127.0.0.1:{base_settings.embedded_port}",
        grpc_port=base_settings.embedded_grpc_port,
        collection="TestAppRepair",
        corpus=corpus,
    )
    said = "The index needs repair: 1 of 2 entries are missing (the Weaviate server stopped without saving them)"
    try:
        at = open_app("Corpus")
        assert any(said in t for t in texts(at.error))
        assert any("Index needs repair" in t for t in texts(at.sidebar.markdown))
        assert any(said in t for t in texts(at.sidebar.caption))
        assert "corpus_repair" in button_keys(at)
        assert dict(zip(at.dataframe[0].value["entry_id"], at.dataframe[0].value["indexed"], strict=True)) == {
            "net/DnsDown": "partial",
            "net/PacketLoss": "indexed",
        }
        at = open_app(q="DNS resolution fails")
        assert any(said in t for t in texts(at.error)) and "repair_for_lookup" in button_keys(at)

        monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
        for page, key in (("Corpus", "corpus_repair"), ("Lookup", "repair_for_lookup")):
            at = open_app(page, q="DNS resolution fails")
            assert any(said in t for t in texts(at.error)), page
            assert key not in button_keys(at), page
            assert any("Repair is off: the app is read-only" in t for t in texts(at.caption)), page
        assert store.indexed_state()["net/DnsDown"][1] == 1  # nothing was written

        monkeypatch.delenv("LOOKUP_READ_ONLY")
        at = open_app("Corpus")
        at.button(key="corpus_repair").click().run()
        assert_clean(at)
        assert any("1 updated, 1 unchanged" in s for s in texts(at.success))
        assert not any("needs repair" in t for t in texts(at.error) + texts(at.sidebar.caption))
        assert "corpus_repair" not in button_keys(at)
        assert set(at.dataframe[0].value["indexed"]) == {"indexed"}
    finally:
        store.drop()
