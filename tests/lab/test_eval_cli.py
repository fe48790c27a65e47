"""`python -m retrieval eval` as a user runs it: judgment coverage in its JSON, its table and its HTML report."""

from __future__ import annotations

import json

from retrieval.config import REPO_ROOT
from retrieval.evals.coverage import COVERAGE_KEY

from ..helpers.cli import cli

SAMPLE = REPO_ROOT / "sample_corpus"


def test_eval_prints_coverage_and_a_set_judged_from_calls_says_how_much_was_judged(cli_env, tmp_path):
    folder = tmp_path / "judged"
    folder.mkdir()
    judged = folder / "judged-sample.yaml"
    judged.write_text(
        f"name: judged-sample\ncorpus: {SAMPLE}\ncases:\n"
        "  - id: one\n    query: Pod checkout-api is in CrashLoopBackOff\n    expected: [kubernetes/PodCrashLoopBackOff]\n"
        "    not_relevant: [kubernetes/PodOOMKilled]\n    invocation: inv-1\n"
        "  - id: two\n    query: the postgres disk is full\n    expected: [databases/PostgresDiskFull]\n"
    )
    env = dict(cli_env, LOOKUP_L1_ENABLED="false", LOOKUP_JUDGMENTS_DIR=str(folder))
    report = tmp_path / "report.html"
    out = cli("eval", str(judged), "--configs", "l0_only", "--no-save", "--json", "--report", str(report), env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    coverage = data["coverage"]
    cases = {c["id"]: c for c in data["cases"]}
    ranked = {cid: c["configs"]["l0_only"]["ranking"][:10] for cid, c in cases.items()}
    judged_one = [e for e in ranked["one"] if e in ("kubernetes/PodCrashLoopBackOff", "kubernetes/PodOOMKilled")]
    judged_two = [e for e in ranked["two"] if e == "databases/PostgresDiskFull"]
    results = len(ranked["one"]) + len(ranked["two"])
    assert coverage["configs"]["l0_only"]["judged"] == len(judged_one) + len(judged_two)
    assert coverage["configs"]["l0_only"]["results"] == results > 0
    assert cases["one"]["unjudged"]["l0_only"] == [e for e in ranked["one"] if e not in judged_one]
    assert coverage["traffic"]["from_calls"] == 1 and coverage["traffic"]["results"] == len(ranked["one"])
    assert "1 of its 2 cases were judged from recorded calls" in report.read_text()

    text = cli("eval", str(judged), "--configs", "l0_only", "--no-save", env=env)
    assert text.returncode == 0, text.stderr
    header = next(line for line in text.stdout.splitlines() if line.startswith("config"))
    assert COVERAGE_KEY in header
    share = coverage["configs"]["l0_only"]["share"]
    row = next(line for line in text.stdout.splitlines() if line.startswith("l0_only"))
    assert f"{share:.3f}" in row
    assert "1 of its 2 cases were judged from recorded calls" in text.stdout
