"""The L0 hints of every case of some eval sets as JSON (dump), and which cases differ between two dumps (diff). Usage:
python -m retrieval.evals.hints_check dump OUT.json SET.yaml [SET.yaml ...]
python -m retrieval.evals.hints_check diff BEFORE.json AFTER.json [--ignore-terms: all but how terms are written]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from retrieval.config import eval_set_corpus
from retrieval.core.corpus import load_corpus
from retrieval.core.hints import L0Index
from retrieval.core.lookup import search_text
from retrieval.evals.sets import load_eval_set


def dump_hints(set_paths: Iterable[Path | str], *, corpus_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """ "<set name>/<case id>" -> the case's query and its hints (`L0Hints.to_dict`), on the corpus each set names
    (or `corpus_dir`). One L0 index per corpus."""
    indexes: dict[Path, L0Index] = {}
    out: dict[str, dict[str, Any]] = {}
    for path in set_paths:
        eval_set = load_eval_set(path)
        root = eval_set_corpus(corpus_dir, eval_set.corpus_dir, env={})
        if root is None:
            raise ValueError(f"{path}: the eval set names no corpus, and none was given")
        root = Path(root).resolve()
        if root not in indexes:
            indexes[root] = L0Index(load_corpus(root).entries)
        for case in eval_set.cases:
            out[f"{eval_set.name}/{case.id}"] = {
                "query": case.query,
                "hints": indexes[root].match(search_text(case.query)).to_dict(),
            }
    return out


def without_written_terms(hints: dict[str, Any]) -> dict[str, Any]:
    """`hints` without how its terms are written: no `term` in a keyword or a match's terms, no entity list."""

    def bare(terms: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in t.items() if k != "term"} for t in terms]

    out = {k: v for k, v in hints.items() if k != "entities"}
    out["matched_keywords"] = bare(hints.get("matched_keywords", []))
    out["matches"] = [{**m, "terms": bare(m.get("terms", []))} for m in hints.get("matches", [])]
    return out


def diff_hints(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], *, ignore_terms: bool = False) -> list[str]:
    """One line per case whose hints differ (and per case only one side has), naming the parts that differ;
    `ignore_terms` compares all but how the terms are written (without_written_terms)."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            lines.append(f"{key}: only {'after' if key in after else 'before'}")
            continue
        a, b = before[key]["hints"], after[key]["hints"]
        if ignore_terms:
            a, b = without_written_terms(a), without_written_terms(b)
        parts = [part for part in sorted(set(a) | set(b)) if a.get(part) != b.get(part)]
        if parts:
            lines.append(f"{key}: {', '.join(parts)} differ")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 3 and args[0] == "dump":
        Path(args[1]).write_text(json.dumps(dump_hints(args[2:]), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    ignore = "--ignore-terms" in args
    args = [a for a in args if a != "--ignore-terms"]
    if len(args) == 3 and args[0] == "diff":
        before, after = (json.loads(Path(p).read_text(encoding="utf-8")) for p in args[1:])
        lines = diff_hints(before, after, ignore_terms=ignore)
        print("\n".join(lines) if lines else f"identical hints on all {len(before)} cases")
        return 1 if lines else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
