"""Where corpora and eval sets live (the configured corpus, the repo's, ../shared's) and the collection each
corpus is indexed in."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from retrieval.config import REPO_ROOT, Settings, collection_for
from retrieval.errors import EvalSetError
from retrieval.evals.sets import corpus_fit, load_eval_set

SHARED_DIR = REPO_ROOT.parent / "shared"
SAMPLE_CORPUS = REPO_ROOT / "sample_corpus"
ADDED_CORPORA = "added-corpora.json"  # in the data folder: the folders added in the app, in the order they were added


@dataclass(frozen=True)
class CorpusChoice:
    """A corpus folder someone can pick, and the Weaviate collection that holds its chunks."""

    label: str
    path: Path
    collection: str


@dataclass(frozen=True)
class EvalSetFile:
    label: str  # e.g. "eval_sets/sample-ops-alerts.yaml" or "shared/eval_sets/runbooks-alert-summaries.yaml"
    path: Path


def same_path(a: Path | str | None, b: Path | str | None) -> bool:
    if a is None or b is None:
        return False
    return Path(a).resolve() == Path(b).resolve()


def known_corpora(settings: Settings, *, shared_dir: Path = SHARED_DIR, extra: Iterable[Path | str] = ()) -> list[CorpusChoice]:
    """The configured corpus first (in `settings.collection`), then the sample corpus, ../shared/corpora/*
    and `extra`, each once, each in its own collection. Labels are folder names, made unique (and so are
    the collections: a second folder named like an earlier one gets Kb_<name>_2)."""
    out: list[CorpusChoice] = []

    def add(path: Path, collection: str | None = None, *, must_exist: bool = True) -> None:
        if (must_exist and not path.is_dir()) or any(same_path(path, c.path) for c in out):
            return
        label, n = path.resolve().name, 2
        while any(c.label == label for c in out):
            label, n = f"{path.resolve().name}-{n}", n + 1
        # Two folders of one name would share Kb_<name>, and ingesting one would empty the other's.
        base = name = collection or collection_for(path, settings.embedding_model)
        n = 2
        while any(c.collection == name for c in out):
            name, n = f"{base}_{n}", n + 1
        out.append(CorpusChoice(label, path.resolve(), name))

    add(Path(settings.corpus_dir), settings.collection, must_exist=False)  # a missing one still shows, to be named
    add(SAMPLE_CORPUS)
    corpora = Path(shared_dir) / "corpora"
    if corpora.is_dir():
        for path in sorted(p for p in corpora.iterdir() if p.is_dir() and not p.name.startswith(".")):
            add(path)
    for extra_path in extra:
        add(Path(extra_path))
    return out


def added_corpora(settings: Settings) -> list[Path]:
    """The corpus folders added in the app (remember_corpus), oldest first; [] when none or the file is unreadable."""
    try:
        listed = json.loads((Path(settings.data_dir) / ADDED_CORPORA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [Path(p) for p in listed if isinstance(p, str)] if isinstance(listed, list) else []


def remember_corpus(settings: Settings, folder: Path | str) -> None:
    """Add `folder` to the corpora the app offers (known_corpora's `extra`), once; written whole, then renamed."""
    added = added_corpora(settings)
    if any(same_path(p, folder) for p in added):
        return
    target = Path(settings.data_dir) / ADDED_CORPORA
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps([str(p) for p in added] + [str(Path(folder).resolve())], indent=1), encoding="utf-8")
    os.replace(partial, target)


def eval_set_files(*, repo_root: Path = REPO_ROOT, shared_dir: Path = SHARED_DIR) -> list[EvalSetFile]:
    """eval_sets/*.yaml of the repo, then ../shared/eval_sets/*.yaml when present."""
    out = [EvalSetFile(f"eval_sets/{p.name}", p) for p in sorted((Path(repo_root) / "eval_sets").glob("*.yaml"))]
    out += [EvalSetFile(f"shared/eval_sets/{p.name}", p) for p in sorted((Path(shared_dir) / "eval_sets").glob("*.yaml"))]
    return out


def preferred_eval_set(files: list[EvalSetFile], corpus_dir: Path | str, known_ids: Iterable[str] | None = None) -> int:
    """Index of the largest eval set of the repository or ../shared that fits the loaded corpus (written for
    `corpus_dir`, or, given the corpus's `known_ids`, whose expected entries all exist in it) and has a case with
    a right answer; else the largest that fits; else 0. Sets judged in the app (other labels) are never preferred."""
    known = None if known_ids is None else set(known_ids)
    best: tuple[bool, int, int] | None = None  # (answerable, cases, -index): the largest, the first of equals
    for i, f in enumerate(files):
        if not f.label.startswith(("eval_sets/", "shared/eval_sets/")):
            continue
        try:
            eval_set = load_eval_set(f.path)
        except EvalSetError:
            continue
        by_ids = known is not None and any(c.expected for c in eval_set.cases) and corpus_fit(eval_set, known).fits
        if by_ids or same_path(eval_set.corpus_dir, corpus_dir):
            rank = (any(c.answerable for c in eval_set.cases), len(eval_set.cases), -i)
            best = rank if best is None or rank > best else best
    return -best[2] if best is not None else 0
