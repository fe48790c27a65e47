"""Replay on the real Weaviate (the session's TestSample collection) and a real DuckDB file: recorded lookups
rerun under changed settings, outcomes counted, nothing recorded unless asked; and the CLI command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval.config import REPO_ROOT, child_environment
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import LookupLabError
from retrieval.lab.rank_overlap import overlap_at_k
from retrieval.lab.replay import movement_figures, outcome_of, recorded_calls, replay
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore

from ..conftest import SAMPLE_CORPUS

SAME = "PostgreSQL replication lag on the standby"  # L0 finds the same top by its title: unchanged without L1
NONSENSE = "zebra quantum marmalade"  # L0 matches nothing: without L1 it is now empty
POD = "Pod keeps restarting"
DISK = "Disk full on the Postgres primary"


@pytest.mark.parametrize(
    "before, after, outcome",
    [
        (("a", "b"), ("a", "c"), "unchanged"),
        (("a", "b"), ("b", "a"), "changed"),
        (("a",), (), "now_empty"),
        ((), (), "unchanged"),
        ((), ("a",), "changed"),
    ],
)
def test_outcome_by_the_top_result(before, after, outcome):
    assert outcome_of(before, after) == outcome


@pytest.fixture
def recorded(db_path, base_settings, sample_corpus, sample_store, embedder):
    """Five recorded lookups with L1 on (four distinct queries; DISK under another session tag)."""
    settings = base_settings.with_(collection="TestSample", session_tag="seed")
    store = InvocationStore(db_path)
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, store)
    before = {}
    for query in (SAME, NONSENSE, POD, SAME):
        before[query] = lookup_knowledge(query, services, settings.options())
    lookup_knowledge(DISK, services, settings.with_(session_tag="other").options())
    store.flush()
    return store, LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None), settings, before


def test_replay_under_changed_settings_counts_outcomes_and_records_nothing(recorded):
    store, services, settings, before = recorded
    assert store.count() == 5
    calls, matched = recorded_calls(store, InvocationFilter())
    assert matched == 5 and len(calls) == 5
    assert calls[0].query == DISK  # newest first
    assert {c.query: c.results for c in calls}[SAME] == tuple(r.entry_id for r in before[SAME].results)

    off = settings.with_(l1_enabled=False)
    report = replay(calls, services, off)
    by_query = {c.call.query: c for c in report.calls}
    assert by_query[NONSENSE].outcome == "now_empty" and by_query[NONSENSE].after_top is None
    assert by_query[SAME].outcome == "unchanged" and by_query[SAME].after_top == "databases/PostgresReplicationLag"
    # every outcome as a direct lookup under the same settings says it should be
    for call in report.calls:
        direct = lookup_knowledge(call.call.query, services, off.options())
        assert call.after == tuple(r.entry_id for r in direct.results)
        assert call.outcome == outcome_of(call.call.results, call.after)
    expected = {
        o: sum(outcome_of(c.call.results, c.after) == o for c in report.calls) for o in ("changed", "unchanged", "now_empty")
    }
    assert {o: report.totals[o] for o in expected} == expected
    assert report.totals["calls"] == 5 and report.totals["failed"] == 0 and report.lookups == 4
    assert report.totals["unchanged"] >= 2 and report.totals["now_empty"] == 1
    assert report.settings["l1_enabled"] is False and not report.recorded and report.session_tag is None
    assert store.count() == 5  # nothing recorded

    # under the settings they were recorded with, every call comes back as it was
    same = replay(calls, services, settings)
    assert same.totals["unchanged"] == 5 and same.totals["same_results"] == 5
    assert store.count() == 5


def test_overlap_rbo_and_the_support_change_per_call_by_domain_and_in_total(recorded):
    store, services, settings, _ = recorded
    calls, _ = recorded_calls(store, InvocationFilter())
    for call in calls:  # the recorded estimate and top domain, as the call returned them
        row = store.get(call.invocation_id)
        assert call.support == row["retrieval_details"]["relevance"]["confidence"]
        assert call.domain == (row["result"]["results"][0]["domain"] if row["result"]["results"] else "(no result)")
    assert all(c.support is not None for c in calls)  # every call had L1 on: an estimate each

    report = replay(calls, services, settings.with_(top_k=2))
    for c in report.calls:
        assert c.after == c.call.results[:2]  # the same ranking, cut at 2
        assert c.overlap == overlap_at_k(c.call.results, c.after) == 2 / len(c.call.results)
        assert c.rbo == pytest.approx(1.0)  # a prefix: RBO_ext extrapolates its agreement
        assert c.support_change == pytest.approx(c.support_after - c.call.support)
    assert report.figures["rbo"] == pytest.approx(1.0) and report.figures["support_compared"] == 5

    off = replay(calls, services, settings.with_(l1_enabled=False))
    nonsense = next(c for c in off.calls if c.call.query == NONSENSE)
    assert nonsense.overlap == 0.0 and nonsense.rbo == 0.0 and nonsense.support_change is None  # now empty
    assert all(c.support_after is None and c.support_change is None for c in off.calls)  # L0 alone: no estimate
    assert off.moved_most()[0].rbo == 0.0
    movement = [c.movement for c in off.moved_most()]
    assert movement == sorted(movement, reverse=True)
    assert off.figures == movement_figures(off.calls) and off.figures["support_compared"] == 0
    assert off.figures["rbo"] == pytest.approx(sum(c.rbo for c in off.calls) / 5, abs=1e-4)
    assert sum(f["calls"] for f in off.by_domain.values()) == 5
    assert set(off.by_domain) == {c.domain for c in calls}
    for domain, figures in off.by_domain.items():
        mine = [c for c in off.calls if c.call.domain == domain]
        assert figures["changed"] == sum(c.outcome in ("changed", "now_empty") for c in mine)
    data = off.to_dict()
    assert [c["invocation_id"] for c in data["calls"]] == [c.call.invocation_id for c in off.moved_most()]
    assert data["rbo_p"] == 0.9 and set(data["by_domain"]) == set(off.by_domain)


def test_the_services_recorder_is_never_used_unless_asked(recorded):
    store, services, settings, _ = recorded
    calls, _ = recorded_calls(store, InvocationFilter())
    from dataclasses import replace as with_

    replay(calls, with_(services, recorder=store), settings.with_(top_k=2))
    assert store.count() == 5


def test_recording_the_replay_adds_one_tagged_row_per_distinct_query(recorded):
    store, services, settings, _ = recorded
    calls, _ = recorded_calls(store, InvocationFilter())
    report = replay(calls, services, settings.with_(l1_enabled=False), recorder=store, session_tag="replay-test")
    store.flush()
    assert report.recorded and report.session_tag == "replay-test"
    assert store.count() == 5 + 4 and store.count("replay-test") == 4
    ids = {c.replay_id for c in report.calls}
    assert None not in ids and len(ids) == 4
    row = store.get(next(c.replay_id for c in report.calls if c.call.query == NONSENSE))
    assert row["input"] == NONSENSE and row["status"] == "empty" and row["session_tag"] == "replay-test"


def test_the_invocations_filters_and_the_limit_pick_the_calls(recorded):
    store, *_ = recorded
    seed, matched = recorded_calls(store, InvocationFilter(session_tags=("seed",)))
    assert matched == 4 and {c.session_tag for c in seed} == {"seed"}
    newest, matched = recorded_calls(store, InvocationFilter(), limit=2)
    assert matched == 5 and [c.query for c in newest] == [DISK, SAME]
    pod, _ = recorded_calls(store, InvocationFilter(text="POD KEEPS"))
    assert [c.query for c in pod] == [POD]
    with pytest.raises(LookupLabError, match="limit 0"):
        recorded_calls(store, InvocationFilter(), limit=0)


def cli(*args, env):
    full = child_environment()
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "retrieval", "replay", *args], cwd=REPO_ROOT, env=full, capture_output=True, text=True, timeout=600
    )


def test_replay_cli_json_and_text_record_only_when_asked(recorded, tmp_path, base_settings):
    store, *_ = recorded
    store.close()
    env = {
        "LOOKUP_DATA_DIR": str(tmp_path / "data"),
        "LOOKUP_DB_PATH": str(store.db_path),
        "LOOKUP_CORPUS_DIR": str(SAMPLE_CORPUS),
        "LOOKUP_CONFIG": str(tmp_path / "none.yaml"),
        "LOOKUP_L1_ENABLED": "false",  # the changed setting (and no model or Weaviate to start)
    }
    out = cli("--session", "seed", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["totals"]["calls"] == 4 and data["totals"]["now_empty"] == 1 and data["lookups"] == 3
    assert data["recorded"] is False and data["settings"]["l1_enabled"] is False
    assert {c["query"]: c["outcome"] for c in data["calls"]}[NONSENSE] == "now_empty"
    assert set(data["calls"][0]) >= {"invocation_id", "query", "outcome", "top_before", "top_after", "rbo", "overlap_at_k"}
    assert {c["query"]: c["rbo"] for c in data["calls"]}[NONSENSE] == 0.0
    assert data["figures"]["calls"] == 4 and data["figures"]["support_compared"] == 0  # L0 alone: no estimate after
    assert data["calls"][0]["support_before"] is not None and data["calls"][0]["support_change"] is None
    assert sum(f["calls"] for f in data["by_domain"].values()) == 4
    assert InvocationStore(store.db_path).count() == 5

    text = cli("--limit", "1", "--record", "--tag", "cli-replay", env=env)
    assert text.returncode == 0, text.stderr
    assert f"{DISK}" in text.stdout and "1 calls (newest 1 of 5 matching)" in text.stdout
    assert "recorded with session tag 'cli-replay'" in text.stdout
    assert "mean RBO (p = 0.9) " in text.stdout and "rbo " in text.stdout.splitlines()[0]
    assert InvocationStore(store.db_path).count("cli-replay") == 1

    none = cli("--session", "nobody", env=env)
    assert none.returncode == 2 and "no recorded invocation matches" in none.stderr
