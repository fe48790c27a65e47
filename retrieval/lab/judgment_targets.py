"""Where a judgment can go: the eval sets of the judgments folder, the known sets that fit the loaded corpus,
and the path of a new set."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import EvalSetError
from retrieval.evals.catalog import EvalSetFile, same_path
from retrieval.evals.sets import corpus_fit, load_eval_set

JUDGED_LABEL = "judged/"  # how the app labels the sets of the judgments folder (Settings.judged_sets_dir)
_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


@dataclass(frozen=True)
class TargetSet:
    """A known eval set a judgment can go to, and whether it fits the loaded corpus."""

    label: str
    path: Path
    cases: int
    fits: bool
    error: str | None = None  # the set does not load: nothing can be appended to it


def judged_set_files(directory: Path | str) -> list[EvalSetFile]:
    """The eval sets in the judgments folder, labelled judged/<file name> (none when the folder is missing)."""
    folder = Path(directory)
    return [EvalSetFile(f"{JUDGED_LABEL}{p.name}", p) for p in sorted(folder.glob("*.yaml"))] if folder.is_dir() else []


def target_sets(known_ids: Iterable[str], files: Iterable[EvalSetFile], corpus_dir: Path | str | None = None) -> list[TargetSet]:
    """The eval sets `files` names, each with its case count and whether it fits the corpus of `known_ids`
    (folder `corpus_dir`): every entry it expects is there, and a set expecting none names no other corpus."""
    known = set(known_ids)
    out = []
    for f in files:
        try:
            loaded = load_eval_set(f.path)
        except EvalSetError as exc:
            out.append(TargetSet(f.label, f.path, 0, False, str(exc)))
            continue
        other = loaded.corpus_dir is not None and corpus_dir is not None and not same_path(loaded.corpus_dir, corpus_dir)
        fits = corpus_fit(loaded, known).fits and not (other and not any(c.expected for c in loaded.cases))
        out.append(TargetSet(f.label, f.path, len(loaded.cases), fits))
    return out


def new_set_path(name: str, directory: Path | str) -> Path:
    """`<directory>/<name>.yaml`, for a set created in the app (the judgments folder). Refuses odd names."""
    clean = name.strip().removesuffix(".yaml")
    if not _SET_NAME.match(clean):
        raise EvalSetError(f"set name {name!r}: use letters, digits, '.', '_' or '-' (up to 80), starting with a letter or digit")
    return Path(directory) / f"{clean}.yaml"
