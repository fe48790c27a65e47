"""Why not this entry? with AppTest on the session's real Weaviate and a temporary DuckDB file (tests/app/conftest.py):
Lookup explains a picked entry (its verdict first, its stages, its fusion parts beside the top result's) and what it would
take, with a link that opens Lookup with that change; Evaluate counts its misses by cause and links each to Lookup with
`why=`; Runs says how two runs' causes changed."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import pytest

from app_support import keys
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.lab.runs import RunStore

from ..conftest import SAMPLE_CORPUS
from ..helpers.app import assert_clean, open_app, plotly_specs, texts

# A query whose expected entry the default fusion puts second, the BM25F list lifting another above it; BM25F weight
# 0.25 puts it first (what it would take, and the second run below).
INODES = 'Writes fail with "no space left on device" but df -h still shows 40% free.'
INODE_ENTRY = "storage/InodeExhaustion"
DISK_IO = "Batch workers are crawling, CPUs sit mostly waiting on storage and each write takes around 200 ms."
CRASH = "Pod checkout-api is in CrashLoopBackOff and its container restarts keep climbing."
POSTGRES = "Disk full on the Postgres primary"
WHY_SET = f"""name: why-not
description: Two cases the default fusion loses (its BM25F list), one it gets right.
corpus: {SAMPLE_CORPUS}
cases:
  - id: inodes
    query: '{INODES}'
    expected: [{INODE_ENTRY}]
    domain: storage
  - id: disk-io
    query: {DISK_IO}
    expected: [storage/DiskIOLatencyHigh]
    domain: storage
  - id: crash
    query: {CRASH}
    expected: [kubernetes/PodCrashLoopBackOff]
    domain: kubernetes
"""
FUSION = "in the lists, lost in the fusion"


def why_set(folder) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "why-not.yaml").write_text(WHY_SET, encoding="utf-8")


LINK = re.compile(r"\[((?:\\.|[^\]\\])*)\]\(\./([^?)]*)\?([^)]*)\)")


def links(block) -> list[tuple[str, str, dict[str, str]]]:
    """Every Markdown link to a page of the app in a block (or the page): (its text as read, the page's path, its query
    parameters)."""
    found = []
    for element in block.markdown:
        for text, path, query in LINK.findall(element.value):
            found.append((re.sub(r"\\(.)", r"\1", text), path, dict(parse_qsl(query))))
    return found


def warnings_with(at, text: str) -> list[str]:
    return [t for t in texts(at.warning) if text in t]


def test_an_entry_named_in_the_url_is_explained_verdict_first(app_env):
    """?q=…&why=<id>: the picker holds the entry; its verdict sentence comes first, then L0, the route, both L1 lists and
    the fusion parts against the top result, in a table and a chart."""
    at = open_app(q=INODES, why=INODE_ENTRY)
    assert at.selectbox(key=keys.WHY_PICK).value == INODE_ENTRY
    (verdict,) = warnings_with(at, "Why not")
    assert verdict.startswith(f"**Why not Filesystem has run out of inodes?** `{INODE_ENTRY}`:"), verdict
    assert "rank 2, in the top 5: lost in the fusion (rank 2): BM25F" in verdict, verdict
    assert "Cause: **in the lists, lost in the fusion**" in verdict, verdict
    words = texts(at.markdown)
    stages = [t.split(":")[0] for t in words if t.startswith(("**L0**", "**Route**", "**Vector**", "**BM25F**", "**Fusion**"))]
    assert stages == ["**L0**", "**Route**", "**Vector**", "**BM25F**", "**Fusion**"], stages
    (fusion,) = [t for t in words if t.startswith("**Fusion**")]
    assert "rank 2 of" in fusion and "against the top result" in fusion, fusion
    parts = next(t.value for t in at.table if "this entry" in t.value.columns)
    assert list(parts["signal"]) == ["vector", "BM25F", "L0", "named in full"]
    bm25 = parts.set_index("signal").loc["BM25F"]
    assert bm25["this entry"] < bm25["top result"], parts
    (chart,) = [s for s in plotly_specs(at) if "Fusion parts" in str(s["layout"]["title"])]
    mine, top = chart["data"]
    assert mine["name"] == INODE_ENTRY and top["name"] != INODE_ENTRY
    assert mine["y"] == ["vector", "BM25F", "L0", "named in full"] and mine["x"] == list(parts["this entry"])


def test_picking_the_top_result_says_it_is_first_and_the_pick_goes_into_the_url(app_env):
    at = open_app(q=POSTGRES)
    assert at.selectbox(key=keys.WHY_PICK).value is None
    at.selectbox(key=keys.WHY_PICK).set_value("databases/PostgresDiskFull").run()
    assert_clean(at)
    assert at.query_params[keys.WHY] == "databases/PostgresDiskFull"
    (first,) = [t for t in texts(at.success) if "Why not" in t]
    assert "first: databases/PostgresDiskFull is the top result" in first, first
    at.selectbox(key=keys.WHY_PICK).set_value("kubernetes/PodCrashLoopBackOff").run()
    (verdict,) = warnings_with(at, "Why not")
    assert "not ranked, outside the top 5: past the lists' depth (15)" in verdict, verdict


def test_what_it_would_take_links_to_lookup_with_the_change_and_that_lookup_puts_it_first(app_env):
    at = open_app(q=INODES, why=INODE_ENTRY)
    at.button(key="why_take").click().run()
    assert_clean(at)
    (said,) = [t for t in texts(at.markdown) if t.startswith("**What it would take**")]
    assert "first: BM25F weight 1 → 0.25 (rank 1)" in said, said
    ((text, path, params),) = [link for link in links(at) if "open Lookup with it" in link[0]]
    assert text == "first with BM25F weight 1 → 0.25 (rank 1): open Lookup with it" and path == "", text
    assert params[keys.WHY] == INODE_ENTRY and params[keys.LEXICAL_WEIGHT] == "0.25" and params[keys.QUERY] == INODES
    changed = open_app(**params)
    (first,) = [t for t in texts(changed.success) if "Why not" in t]
    assert f"first: {INODE_ENTRY} is the top result" in first, first


def test_an_unknown_entry_in_the_url_is_named_and_nothing_is_picked(app_env):
    at = open_app(q=POSTGRES, why="storage/NoSuchEntry")
    assert at.selectbox(key=keys.WHY_PICK).value is None
    said = "**storage/NoSuchEntry** (from the link) is not an entry of this knowledge base (48"
    assert warnings_with(at, said), texts(at.warning)


def test_read_only_explains_and_runs_what_it_would_take(app_env, served_on):
    """A read-only app (it listens beyond this machine) explains and runs what it would take all the same (the row
    counts of the invocation store are checked in chromium: test_why_not_browser)."""
    served_on("0.0.0.0")
    at = open_app(q=INODES, why=INODE_ENTRY)
    assert any("the app is read-only and records no lookup" in t for t in texts(at.caption))
    assert warnings_with(at, "lost in the fusion (rank 2)")
    at.button(key="why_take").click().run()
    assert_clean(at)
    (said,) = [t for t in texts(at.markdown) if t.startswith("**What it would take**")]
    assert "first: BM25F weight 1 → 0.25 (rank 1)" in said, said


def test_evaluate_counts_misses_by_cause_and_links_each_to_lookup(app_env):
    why_set(app_env / "judged-eval-sets")
    at = open_app("Evaluate", es="judged/why-not.yaml")
    at.multiselect(key="eval_configs-True").set_value([]).run()  # lookup alone
    at.button(key="run_eval").click().run()
    assert_clean(at)
    table = next(t.value for t in at.table if list(t.value.columns[:1]) == ["configuration"])
    assert table.to_dict("records") == [{"configuration": "lookup", FUSION: "2", "misses": "2"}]
    misses = [link for link in links(at) if "why not" in link[0]]
    assert [text for text, _, _ in misses] == [
        f"inodes: {FUSION} (why not {INODE_ENTRY})",
        f"disk-io: {FUSION} (why not storage/DiskIOLatencyHigh)",
    ]
    ((_, path, params),) = [link for link in misses if link[0].startswith("inodes:")]
    assert path == ""
    assert params[keys.WHY] == INODE_ENTRY and params[keys.QUERY] == INODES and params[keys.TOP_K] == "10"
    opened = open_app(**params)
    (verdict,) = warnings_with(opened, "Why not")
    assert "rank 2, in the top 10: lost in the fusion (rank 2)" in verdict, verdict


def test_every_configurations_misses_open_lookup_with_its_settings_and_explain(app_env):
    """All six configurations: a row of counts each, and each miss's link opens Lookup with the settings nearest its
    configuration (L1 off for l0_only, the hybrid list alone for hybrid, ...) with the entry explained."""
    why_set(app_env / "judged-eval-sets")
    at = open_app("Evaluate", es="judged/why-not.yaml")
    at.button(key="run_eval").click().run()
    assert_clean(at)
    table = next(t.value for t in at.table if list(t.value.columns[:1]) == ["configuration"])
    assert list(table["configuration"]) == ["l0_only", "l1_unfiltered", "l1_filtered", "bm25", "hybrid", "lookup"]
    assert table.set_index("configuration").loc["lookup", "misses"] == "2"
    # (l0_weight 0 is the default: not in the URL)
    nearest = {"l0_only": {keys.L1_ON: "false"}, "hybrid": {keys.MODE: "hybrid", keys.NAME_WEIGHT: "0"}}
    by_config = {e.label.split()[3]: links(e) for e in at.expander if e.label.startswith("Missed cases of ")}
    counts = dict(zip(table["configuration"], table["misses"], strict=True))
    assert {c: str(len(found)) for c, found in by_config.items()} == {c: n for c, n in counts.items() if n != "0"}
    for config, found in by_config.items():
        for text, _, params in found:
            assert nearest.get(config, {}).items() <= params.items(), (config, params)
            opened = open_app(**params)
            (verdict,) = warnings_with(opened, "Why not")
            assert f"`{params[keys.WHY]}`:" in verdict, (config, text, verdict)


@pytest.fixture
def two_runs(app_env, sample_corpus, sample_store, embedder, base_settings):
    """Two real runs of the three-case set saved in the app's DuckDB file: the defaults, then BM25F weight 0.25."""
    why_set(app_env / "sets")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)
    eval_set = load_eval_set(app_env / "sets" / "why-not.yaml", known_ids=[e.entry_id for e in sample_corpus.entries])
    store = RunStore(app_env / "invocations.duckdb")
    first = base_settings.with_(collection="TestSample")
    second = first.with_(lexical_weight=0.25)
    a = store.save(run_eval(eval_set, services, first, configs=["lookup"]), eval_set, first)
    b = store.save(run_eval(eval_set, services, second, configs=["lookup"]), eval_set, second)
    return a, b


def test_runs_says_how_the_causes_changed(two_runs):
    a, b = two_runs
    at = open_app()
    at.switch_page("pages/runs.py").run()
    assert_clean(at)
    assert (at.selectbox(key="run_a").value, at.selectbox(key="run_b").value) == (a.run_id, b.run_id)
    (said,) = [t for t in texts(at.markdown) if t.startswith("**Misses by cause, B against A**")]
    assert said.endswith(f": 2 fewer {FUSION}"), said
    table = next(t.value for t in at.table if "B − A" in t.value.columns and "cause" in t.value.columns)
    rows = {r["cause"]: (r["A"], r["B"], r["B − A"]) for _, r in table.iterrows()}
    assert rows == {FUSION: ("2", "0", "-2"), "misses": ("2", "0", "-2")}, rows
