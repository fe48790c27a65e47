"""retrieval.evals.hints_check: the hints of every case of eval sets, dumped and compared (the check that an L0 change
leaves the shared sets' hints as they were)."""

from __future__ import annotations

import copy
import json

from retrieval.config import REPO_ROOT
from retrieval.evals.hints_check import diff_hints, dump_hints, main

SETS = sorted((REPO_ROOT / "eval_sets").glob("sample-*.yaml"))


def test_a_dump_holds_every_case_with_its_hints():
    dump = dump_hints(SETS)
    assert len(dump) > 50 and all(set(v) == {"query", "hints"} for v in dump.values())
    assert any(v["hints"]["matches"] for v in dump.values())
    assert diff_hints(dump, dump_hints(SETS)) == []  # the same code gives the same hints


def test_the_diff_names_each_changed_case_and_part_and_can_ignore_written_terms():
    before = dump_hints(SETS)
    key = next(k for k, v in before.items() if v["hints"]["matched_keywords"])
    after = copy.deepcopy(before)
    after[key]["hints"]["matched_keywords"][0]["term"] = "something else"
    assert diff_hints(before, after) == [f"{key}: matched_keywords differ"]
    assert diff_hints(before, after, ignore_terms=True) == []
    after[key]["hints"]["domains"] = ["elsewhere"]
    del after[next(k for k in after if k != key)]
    lines = diff_hints(before, after, ignore_terms=True)
    assert f"{key}: domains differ" in lines and any(line.endswith("only before") for line in lines)


def test_the_command_dumps_and_diffs(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["dump", str(a), *map(str, SETS)]) == 0
    b.write_text(a.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["diff", str(a), str(b)]) == 0 and "identical hints" in capsys.readouterr().out
    changed = json.loads(b.read_text(encoding="utf-8"))
    next(iter(changed.values()))["hints"]["domains"] = ["x"]
    b.write_text(json.dumps(changed), encoding="utf-8")
    assert main(["diff", str(a), str(b)]) == 1 and "domains differ" in capsys.readouterr().out
    assert main(["nothing"]) == 2
