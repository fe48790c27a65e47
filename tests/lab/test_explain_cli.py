"""`python -m retrieval explain` as a user runs it, against the test session's real Weaviate: the verdict first, the
JSON's rank the lookup's own, what it would take, and a clear error for an id the knowledge base does not hold."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from retrieval.records.spool import Spool, spool_dir_of

from ..helpers.cli import cli

QUERY = "Pod checkout-api is in CrashLoopBackOff"
ENTRY = "kubernetes/PodOOMKilled"  # a near neighbour of the right answer, not first


def _rows(db: Path) -> int:
    """Calls recorded: the DuckDB file's rows and those waiting in its spool."""
    spooled = Spool(spool_dir_of(db)).pending() if spool_dir_of(db).exists() else 0
    if not db.exists():
        return spooled
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        stored = con.execute("select count(*) from tool_invocation").fetchone()[0] if "tool_invocation" in tables else 0
    return stored + spooled


def test_explain_says_the_verdict_first_ranks_as_the_lookup_does_and_records_nothing(cli_env, tmp_path):
    cli_env = dict(cli_env, LOOKUP_CANDIDATE_DEPTH="15")
    data_dir = Path(cli_env["LOOKUP_DATA_DIR"])
    out = cli("explain", QUERY, "--entry", ENTRY, "--json", env=cli_env)
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)
    assert trace["entry_id"] == ENTRY and trace["query"] == QUERY
    assert trace["rank"] is not None and trace["rank"] > 1
    assert trace["cause"]["cause"] in {"kept_out_by_filter", "past_depth", "lost_in_fusion", "near_duplicate"}
    assert trace["routing"]["entry_domain"] == "kubernetes"
    assert {"vector", "bm25", "fusion", "l0"} <= trace.keys()
    assert _rows(data_dir / "invocations.duckdb") == 0  # explaining records nothing

    text = cli("explain", QUERY, "--entry", ENTRY, env=cli_env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"{ENTRY}: {trace['verdict']}"
    assert any(line.strip().startswith("fusion:") and f"rank {trace['rank']} of" in line for line in lines)

    deep = cli("lookup", QUERY, "--json", env=dict(cli_env, LOOKUP_TOP_K="15"))  # more shown, the lists as deep
    assert deep.returncode == 0, deep.stderr
    ranking = [r["entry_id"] for r in json.loads(deep.stdout)["results"]]
    assert ranking.index(ENTRY) + 1 == trace["rank"]
    assert trace["fusion"]["top"] == ranking[0]
    assert _rows(data_dir / "invocations.duckdb") == 1  # the lookup did record: the count above could have moved


def test_what_it_would_take_names_a_change_whose_rank_the_lookup_confirms(cli_env):
    out = cli("explain", QUERY, "--entry", ENTRY, "--what-it-would-take", "--json", env=cli_env)
    assert out.returncode == 0, out.stderr
    take = json.loads(out.stdout)["what_it_would_take"]
    assert take["entry_id"] == ENTRY and take["tried"]
    first = take["first"]
    if first is None:
        assert take["summary"].startswith("first: none of these")
        assert all(t["rank"] != 1 for t in take["tried"])
        return
    assert first["rank"] == 1
    assert all(t["rank"] != 1 for t in take["tried"][:-1])  # the smallest: no change tried before it put it first
    if first["setting"] in ("filter", "embedding_model"):
        return  # not a setting of the environment; the core tests apply these
    env_name = "LOOKUP_" + first["setting"].upper()
    deep = cli("lookup", QUERY, "--json", env=dict(cli_env, **{env_name: str(first["value"])}))
    assert deep.returncode == 0, deep.stderr
    assert json.loads(deep.stdout)["results"][0]["entry_id"] == ENTRY


def test_an_unknown_entry_is_one_line_naming_the_ids_it_may_mean(cli_env):
    out = cli("explain", QUERY, "--entry", "kubernetes/PodOOMKiled", env=cli_env)
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert "'kubernetes/PodOOMKiled' is not in the corpus" in errors[0]
    assert "did you mean kubernetes/PodOOMKilled" in errors[0]
    assert out.stdout == ""


def test_a_blank_query_is_refused_before_anything_starts(cli_env):
    out = cli("explain", "   ", "--entry", ENTRY, env=cli_env)
    assert out.returncode == 2
    assert out.stderr.startswith("error:") and "query" in out.stderr
