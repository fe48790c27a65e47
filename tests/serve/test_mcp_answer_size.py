"""What a lookup_knowledge answer costs an agent: a brief answer (the default) against a full one (`detail: "full"`),
through the real `python -m retrieval serve` over stdio with the SDK's client (which checks each answer against the
tool's output schema, as jsonschema does here again): the test session's Weaviate, the real model, real DuckDB files.
The slow test runs every case of every shared eval set on its corpus and measures the largest brief answer."""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

import jsonschema
import pytest

from retrieval.evals.sets import load_eval_set
from retrieval.serve.answer_brief import BRIEF_CHARS, MIN_EXCERPT_CHARS, fit_excerpts, shorten, why
from retrieval.serve.mcp_tools import LOOKUP_OUTPUT
from retrieval.store import indexing
from tests.conftest import RUNBOOKS, SHARED, needs_shared
from tests.helpers.mcp_process import serve_env, stdio_client, stored_rows

QUERIES = ("Pod is crash looping and restarting", "disk is full on the database volume", "how do I bake sourdough bread")
BRIEF_KEYS = ["answer", "relevance", "results", "hints", "reason", "layer", "invocation_id", "detail"]
RESULT_KEYS = ["entry_id", "title", "domain", "score", "source", "why", "excerpt"]
# what a brief answer leaves out and a full one holds: the raw lists, features and timings
FULL_ONLY = ("l1", "timings_ms", "routing", "fallback", "status", "query", "searched", "created_at")


def call_all(env: dict[str, str], calls: list[dict], client_name: str) -> tuple[list, list]:
    """(the tools, each call's result): one stdio server for all the calls; leaving closes it (every row flushed)."""

    async def talk():
        async with stdio_client(env, client_name) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool("lookup_knowledge", args) for args in calls]

    return asyncio.run(talk())


def without_timings(row: dict) -> dict:
    """A tool_invocation row as the detail level could change it: all of it but its id, time and timings."""
    details = json.loads(row["retrieval_details"])
    details.pop("timings_ms")
    kept = {k: v for k, v in row.items() if k not in ("id", "created_at") and not k.endswith("_ms")}
    return {**kept, "retrieval_details": details}


def test_a_default_answer_is_brief_a_full_one_holds_everything_and_both_are_recorded_alike(base_settings, sample_store, tmp_path):
    db = tmp_path / "detail.duckdb"
    env = serve_env(base_settings.with_(collection=sample_store.name), db)
    calls = [
        args
        for q in QUERIES
        for args in ({"query": q, "top_k": 5}, {"query": q, "top_k": 5, "detail": "full"}, {"query": q, "detail": "brief"})
    ]
    calls += [{"query": "disk is full", "detail": bad} for bad in ("everything", "", "FULL", 1, None)]
    tools, answers = call_all(env, calls, "test-detail")

    tool = next(t for t in tools if t.name == "lookup_knowledge")
    assert tool.input_schema["properties"]["detail"]["enum"] == ["brief", "full"]
    assert tool.input_schema["properties"]["detail"]["default"] == "brief"
    assert tool.output_schema == LOOKUP_OUTPUT
    refused = answers[3 * len(QUERIES) :]
    for answer, bad in zip(refused, ("everything", "", "FULL", 1, None), strict=True):
        assert answer.is_error and "detail must be 'brief' or 'full', got" in answer.content[0].text, (bad, answer)
    for i in range(len(QUERIES)):
        brief, full, named = answers[3 * i : 3 * i + 3]
        assert not brief.is_error and not full.is_error and not named.is_error
        b, f = brief.structured_content, full.structured_content
        for answer in (brief, full, named):
            jsonschema.validate(answer.structured_content, tool.output_schema)
            assert json.loads(answer.content[0].text) == answer.structured_content
        assert list(b) == BRIEF_KEYS and b["detail"] == "brief" and named.structured_content["detail"] == "brief"
        assert f["detail"] == "full" and all(k in f for k in FULL_ONLY) and not [k for k in FULL_ONLY if k in b]
        assert next(iter(f)) == "answer" and b["answer"] == f["answer"]
        assert f["l1"]["candidates"] and f["hints"]["matches"] is not None and f["relevance"]["features"]
        # the same ranking, the same claim and reason, told briefly
        assert [r["entry_id"] for r in b["results"]] == [r["entry_id"] for r in f["results"]]
        assert [r["score"] for r in b["results"]] == [round(r["score"], 3) for r in f["results"]]
        assert b["reason"] == f["reason"] == f["relevance"]["reason"]
        assert {k: f["relevance"][k] for k in b["relevance"]} == b["relevance"]
        assert b["hints"]["domains"] == f["hints"]["domains"] and b["layer"] == f["layer"]
        titles = {r["title"] for r in b["results"]}
        assert not titles & set(b["hints"]["matched_titles"]) and set(b["hints"]["matched_titles"]) <= set(
            f["hints"]["matched_titles"]
        )
        for r, whole in zip(b["results"], f["results"], strict=True):
            assert list(r) == RESULT_KEYS
            assert r["why"] == why(tuple(whole["ranks"].items()), whole["named"])
            assert r["excerpt"] and len(r["excerpt"]) <= 300 and not r["excerpt"].startswith(r["title"])
            assert whole["excerpt"].startswith(r["excerpt"].rstrip("…"))
        assert len(brief.content[0].text) <= BRIEF_CHARS < len(full.content[0].text)
        print(f"{QUERIES[i]!r}: brief {len(brief.content[0].text)} characters, full {len(full.content[0].text)}")

    # every call was recorded, in full, whatever its detail level: the rows of a brief call and a full one are the same
    rows = {r["id"]: r for r in stored_rows(db)}
    answered = [a.structured_content["invocation_id"] for a in answers[: 3 * len(QUERIES)]]
    assert set(rows) == set(answered)
    for i in range(len(QUERIES)):
        brief_row, full_row = (without_timings(rows[x]) for x in answered[3 * i : 3 * i + 2])
        assert brief_row == full_row
        assert json.loads(brief_row["result"])["relevance"]["features"], "the record lost the features"
        assert brief_row["retrieval_details"]["l1"]["candidates"], "the record lost L1's lists"


def test_excerpts_are_cut_to_fit_the_budget_and_never_below_their_floor():
    long = "word " * 60
    payload = {"answer": "x", "results": [{"entry_id": str(i), "excerpt": ""} for i in range(5)]}
    fit_excerpts(payload, [long.strip()] * 5, budget=1000)
    assert len(json.dumps(payload, ensure_ascii=False, separators=(",", ":"))) <= 1000
    assert all(r["excerpt"].endswith("…") and len(r["excerpt"]) >= MIN_EXCERPT_CHARS - 5 for r in payload["results"])
    fit_excerpts(payload, [long.strip()] * 5, budget=10)  # cannot fit: each excerpt at its floor
    assert all(MIN_EXCERPT_CHARS - 5 <= len(r["excerpt"]) <= MIN_EXCERPT_CHARS for r in payload["results"])
    fit_excerpts(payload, ["short one"] * 5, budget=10_000)
    assert [r["excerpt"] for r in payload["results"]] == ["short one"] * 5
    assert shorten("alpha beta gamma", 11) == "alpha beta…" and shorten("alpha", 11) == "alpha"


def test_why_says_which_signals_ranked_a_result_in_a_few_words():
    assert why((("vector", 1), ("bm25", 3), ("l0", 2)), False) == "vector #1, BM25F #3, L0 #2"
    assert why((("l0", 4),), False) == "L0 #4 only"
    assert why((("vector", 2),), True) == "vector #2 only; named in the query"


# --- every shared set's queries ------------------------------------------------------------------------------------
def shared_sets() -> list[Path]:
    return sorted((SHARED / "eval_sets").glob("*.yaml"))


@pytest.fixture(scope="module")
def shared_collections(request, weaviate_client, embedder):
    """Per corpus a shared eval set names (its `corpus:` field): the collection it is indexed in. The runbooks are
    the session's runbooks_store; any other corpus is indexed here once."""
    from retrieval.core.corpus import load_corpus
    from retrieval.store.weaviate_store import KnowledgeStore

    needs_shared(SHARED / "eval_sets", RUNBOOKS)
    corpora = sorted({load_eval_set(p).corpus_dir for p in shared_sets()} - {None})
    found = {}
    for corpus_dir in corpora:
        needs_shared(corpus_dir)
        if corpus_dir == RUNBOOKS.resolve():
            found[corpus_dir] = request.getfixturevalue("runbooks_store").name
            continue
        store = KnowledgeStore(weaviate_client, f"TestAnswers{corpus_dir.name.title().replace('-', '')}")
        store.drop()
        indexing.ingest(store, load_corpus(corpus_dir), embedder)
        found[corpus_dir] = store.name
    return found


@pytest.mark.slow
def test_a_default_answer_of_five_results_is_at_most_2400_characters_on_every_shared_query(
    base_settings, shared_collections, tmp_path
):
    needs_shared(SHARED / "eval_sets", RUNBOOKS)
    sets = [load_eval_set(p) for p in shared_sets()]
    assert sets, f"no eval sets in {SHARED / 'eval_sets'}"
    sizes: dict[str, dict[str, list[int]]] = {}
    largest = (0, "")
    for corpus_dir, collection in shared_collections.items():
        mine = [s for s in sets if s.corpus_dir == corpus_dir]
        settings = base_settings.with_(collection=collection, corpus_dir=corpus_dir)
        db = tmp_path / f"{collection}.duckdb"
        calls = [
            {"query": case.query, "top_k": 5, **extra} for s in mine for case in s.cases for extra in ({}, {"detail": "full"})
        ]
        tools, answers = call_all(serve_env(settings, db), calls, "test-answer-size")
        schema = next(t for t in tools if t.name == "lookup_knowledge").output_schema
        at = 0
        for s in mine:
            got = sizes[s.name] = {"brief": [], "full": [], "excerpt": []}
            for case in s.cases:
                brief, full = answers[at : at + 2]
                at += 2
                assert not brief.is_error and not full.is_error, (s.name, case.id, brief.content[0].text)
                jsonschema.validate(brief.structured_content, schema)
                jsonschema.validate(full.structured_content, schema)
                assert brief.structured_content["detail"] == "brief" and len(brief.structured_content["results"]) <= 5
                got["brief"].append(len(brief.content[0].text))
                got["full"].append(len(full.content[0].text))
                got["excerpt"] += [len(r["excerpt"]) for r in brief.structured_content["results"]]
                largest = max(largest, (len(brief.content[0].text), f"{s.name} {case.id}"))
        assert len(stored_rows(db)) == len(calls), "a call was not recorded"
    for name, got in sizes.items():
        b, f = got["brief"], got["full"]
        print(
            f"{name}: {len(b)} queries; brief largest {max(b)}, median {statistics.median(b):.0f}; "
            f"full largest {max(f)}, median {statistics.median(f):.0f} characters; "
            f"brief excerpts median {statistics.median(got['excerpt']):.0f}, shortest {min(got['excerpt'])}"
        )
    assert sum(len(got["brief"]) for got in sizes.values()) == sum(len(s.cases) for s in sets)
    assert largest[0] <= BRIEF_CHARS, f"the largest brief answer is {largest[0]} characters ({largest[1]})"
