"""`python -m retrieval traffic` as a user runs it: a separate process over a real DuckDB store of hand-made calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.cli.traffic import parse_moment
from retrieval.config import REPO_ROOT
from retrieval.errors import TrafficError
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.features import FEATURES

from ..helpers.cli import cli
from ..helpers.traffic_records import call


@pytest.fixture
def env(tmp_path):
    db = tmp_path / "calls.duckdb"
    store = InvocationStore(db)
    for c in [
        call("disk full", 0.9, tag="x"),
        call("vm stuck", 0.7, tag="x", day=1),
        call("why is it slow?", 0.2, tag="y", day=1),
    ]:
        store.record(c)
    store.close()
    return {"LOOKUP_DB_PATH": str(db), "LOOKUP_DATA_DIR": str(tmp_path / "data")}


def test_json_names_the_estimate_and_its_calibration(env):
    out = cli("traffic", "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["estimate"]["overall"]["estimated_hit_at_1"] == pytest.approx(0.6)
    assert data["estimate"]["calibration"] == ["self:fit0000000a1"]
    assert [d["key"] for d in data["estimate"]["per_session_tag"]] == ["x", "y"]
    assert sum(data["features"]["query_words"].values()) == 3


def test_text_and_the_gate(env):
    out = cli("traffic", "--session", "x", "--min-estimate", "0.75", env=env)
    assert out.returncode == 0, out.stderr
    assert "Estimated hit@1 (a label-free estimate, not a measurement): 0.800" in out.stdout
    assert "this knowledge base's own baselines (fit fit0000000a1)" in out.stdout and "query_form" in out.stdout
    low = cli("traffic", "--min-estimate", "0.8", env=env)
    assert low.returncode == 1 and "GATE FAILED: estimated hit@1 0.6000 is below the threshold 0.8" in low.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--session", "nobody"), "error: session tag 'nobody' has no calls; the tags recorded: x, y"),
        (("--since", "yesterday"), "error: --since 'yesterday': expected a span"),
        (("--since", "30m"), "error: no calls in the window (since "),
        (("--collection", "Kb_none"), "error: collection 'Kb_none' has no calls; the collections recorded: Kb_test"),
    ],
)
def test_bad_input_is_named(env, args, message):
    out = cli("traffic", *args, env=env)
    assert out.returncode == 2 and message in out.stderr, out.stderr


def test_an_empty_store_is_named(tmp_path):
    out = cli("traffic", env={"LOOKUP_DB_PATH": str(tmp_path / "none.duckdb"), "LOOKUP_DATA_DIR": str(tmp_path)})
    assert out.returncode == 2 and "the invocation store holds no calls yet" in out.stderr


def test_moments():
    now = datetime(2026, 3, 8, tzinfo=UTC)
    assert parse_moment("7d", "--since", now) == now - timedelta(days=7)
    assert parse_moment("24h", "--since", now) == now - timedelta(hours=24)
    assert parse_moment(" 30m", "--since", now) == now - timedelta(minutes=30)
    assert parse_moment("2026-03-01", "--until", now) == datetime(2026, 3, 1, tzinfo=UTC)
    with pytest.raises(TrafficError, match="--until '7 days'"):
        parse_moment("7 days", "--until", now)


def test_the_calls_beside_an_eval_set_and_a_set_of_another_corpus(env, cli_env, tmp_path):
    both = {**cli_env, **env}
    alerts = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"
    out = cli("traffic", "--json", "--eval-set", str(alerts), env=both)
    assert out.returncode == 0, out.stderr
    mix = json.loads(out.stdout)["mix"]
    assert mix["eval_sets"] == ["sample-ops-alerts"] and "such cases" in mix["sentence"]
    assert {f["feature"] for f in mix["features"]} == set(FEATURES)
    assert all(0 <= f["divergence"] <= 1 for f in mix["features"])
    text = cli("traffic", "--eval-set", str(alerts), env=both)
    assert "Traffic beside the eval sets (sample-ops-alerts):" in text.stdout and mix["sentence"] in text.stdout
    other = tmp_path / "elsewhere.yaml"
    other.write_text("name: elsewhere\ncases:\n  - {id: a, query: vault sealed, expected: [secrets/VaultSealed]}\n")
    refused = cli("traffic", "--eval-set", str(other), env=both)
    assert refused.returncode == 2 and "elsewhere.yaml" in refused.stderr and "collection TestSample" in refused.stderr, (
        refused.stderr
    )
