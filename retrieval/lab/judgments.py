"""Judgments: a query, the entries someone marked relevant (none: an unanswerable case) and the shown results left
unmarked (not relevant), appended to an eval set YAML as text, the rest of the file byte for byte. The result is validated
before it replaces the file; on any error the file is untouched and the error names the file and field."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrieval.errors import EvalSetError
from retrieval.evals.sets import EvalSet, load_eval_set
from retrieval.lab.case_yaml import indented, insert_case, yaml_field
from retrieval.lab.judgment_targets import JUDGED_LABEL, TargetSet, judged_set_files, new_set_path, target_sets

# Where a judgment can go is judgment_targets' (the app imports it from here too).
__all__ = [
    "JUDGED_LABEL",
    "AppendResult",
    "Judgment",
    "TargetSet",
    "append_case",
    "create_eval_set",
    "judged_set_files",
    "new_set_path",
    "same_judgment",
    "shown_not_relevant",
    "suggest_case_id",
    "suggest_domain",
    "target_sets",
]

_WORD = re.compile(r"[A-Za-z0-9]+")
ID_WORDS = 5  # words of the query a generated case id is made of


@dataclass(frozen=True)
class Judgment:
    """A query and what someone judged relevant for it; `relevant` empty: no entry answers it."""

    query: str
    relevant: tuple[str, ...]
    domain: str | None = None
    case_id: str | None = None  # None: generated from the query, unique within the set
    source: str = ""  # where it was judged (e.g. "Lookup", "invocation 1a2b…"), kept as a comment
    not_relevant: tuple[str, ...] = ()  # the shown results left unmarked: judged not relevant
    invocation: str | None = None  # the recorded call it was judged from, kept as the case's field

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "relevant": list(self.relevant),
            "domain": self.domain,
            "case_id": self.case_id,
            "source": self.source,
            "not_relevant": list(self.not_relevant),
            "invocation": self.invocation,
        }


def shown_not_relevant(shown: Sequence[str], relevant: Sequence[str]) -> tuple[str, ...]:
    """The shown results a person left unmarked, when they marked some relevant; none when none is (an
    unanswerable case already says no entry answers it)."""
    picked = set(relevant)
    return tuple(dict.fromkeys(e for e in shown if e not in picked)) if picked else ()


@dataclass(frozen=True)
class AppendResult:
    path: str
    case_id: str
    created: bool  # a new eval set file
    cases: int  # cases in the set now
    set_name: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "case_id": self.case_id,
            "created": self.created,
            "cases": self.cases,
            "set_name": self.set_name,
        }


def suggest_case_id(query: str, existing: Iterable[str]) -> str:
    """CamelCase of the query's first words (`PodIsCrashLooping`), with -2, -3… until unique in `existing`."""
    taken = {str(e) for e in existing}
    words = _WORD.findall(query)[:ID_WORDS]
    base = "".join(w[:1].upper() + w[1:] for w in words) or "Case"
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def suggest_domain(relevant_domains: Sequence[str | None], routed: str | None = None) -> str | None:
    """The domain the relevant entries share; with none relevant, the domain the lookup was routed to."""
    found = {d for d in relevant_domains if d}
    if len(found) == 1:
        return found.pop()
    return routed if not relevant_domains else None


def same_judgment(eval_set: EvalSet, judgment: Judgment) -> str | None:
    """The id of the case of `eval_set` that already holds this judgment (same query, same relevant entries)."""
    query = " ".join(judgment.query.split()).casefold()
    for case in eval_set.cases:
        if " ".join(case.query.split()).casefold() == query and set(case.expected) == set(judgment.relevant):
            return case.id
    return None


def append_case(path: Path | str, judgment: Judgment, *, known_ids: Iterable[str] | None = None) -> AppendResult:
    """Append the judged case to an existing eval set. `known_ids` (the corpus) checks the new case's ids."""
    path = Path(path)
    with _folder_lock(path):
        before = load_eval_set(path)  # a set that does not load now gets nothing appended
        twin = same_judgment(before, judgment)
        if twin is not None:
            raise EvalSetError(f"{path}: case '{twin}' already holds this judgment (same query, same relevant entries)")
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise EvalSetError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
        case_id = _case_id(judgment, before, path)
        new_text = insert_case(text, _case_text(case_id, judgment), path)
        after = _validated(path, new_text, case_id, judgment, known_ids, before=before)
        _replace(path, new_text.encode("utf-8"))
    return AppendResult(str(path), case_id, False, len(after.cases), after.name)


def create_eval_set(
    path: Path | str,
    judgment: Judgment,
    *,
    name: str | None = None,
    description: str = "",
    corpus_dir: Path | str | None = None,
    known_ids: Iterable[str] | None = None,
) -> AppendResult:
    """A new eval set file holding the judged case. Refuses to overwrite an existing file."""
    path = Path(path)
    if path.exists():
        raise EvalSetError(f"{path}: already exists: pick it from the known sets to add the case to it")
    try:
        path.parent.mkdir(exist_ok=True)  # the judgments folder is made on the first judgment
    except OSError as exc:
        raise EvalSetError(f"{path}: folder {path.parent} cannot be made: {exc.strerror or exc}") from exc
    set_name = (name or path.stem).strip()
    lines = [yaml_field("name", set_name)]
    lines.append(
        yaml_field("description", description.strip() or f"Cases judged in Lookup Lab, from {datetime.now(UTC):%Y-%m-%d}.")
    )
    if corpus_dir is not None:
        lines.append(yaml_field("corpus", os.path.relpath(Path(corpus_dir).resolve(), path.parent.resolve())))
    lines.append("cases:")
    case_id = judgment.case_id.strip() if judgment.case_id and judgment.case_id.strip() else suggest_case_id(judgment.query, ())
    text = "\n".join(lines) + "\n" + indented(_case_text(case_id, judgment), "  - ", "    ")
    with _folder_lock(path):
        after = _validated(path, text, case_id, judgment, known_ids, before=None)
        try:
            with open(path, "x", encoding="utf-8", newline="") as out:  # exclusive: never overwrites a file made meanwhile
                out.write(text)
        except FileExistsError as exc:
            raise EvalSetError(f"{path}: already exists: pick it from the known sets to add the case to it") from exc
        except OSError as exc:
            raise EvalSetError(f"{path}: cannot be written: {exc.strerror or exc}") from exc
    return AppendResult(str(path), case_id, True, len(after.cases), after.name)


# --- the text ------------------------------------------------------------------------------------------------
def _case_text(case_id: str, judgment: Judgment) -> list[str]:
    lines = [
        yaml_field("id", case_id),
        yaml_field("query", judgment.query.strip()),
        yaml_field("expected", list(judgment.relevant)),
    ]
    if judgment.not_relevant:
        lines.append(yaml_field("not_relevant", list(judgment.not_relevant)))
    if judgment.domain:
        lines.append(yaml_field("domain", judgment.domain))
    if judgment.invocation:
        lines.append(yaml_field("invocation", judgment.invocation))
    note = f"# judged {datetime.now(UTC):%Y-%m-%d %H:%M} UTC" + (
        f" from {' '.join(judgment.source.split())}" if judgment.source else ""
    )
    return [f"{lines[0]}  {note}", *lines[1:]]


# --- validation and writing ------------------------------------------------------------------------------------
@contextlib.contextmanager
def _folder_lock(path: Path) -> Iterator[None]:
    """One writer at a time in the set's folder, across threads and processes (an flock on the folder), so two
    judgments added at once both land, with different ids."""
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError as exc:
        raise EvalSetError(f"{path}: folder {path.parent} cannot be opened: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


def _case_id(judgment: Judgment, eval_set: EvalSet, path: Path) -> str:
    existing = [c.id for c in eval_set.cases]
    if judgment.case_id and judgment.case_id.strip():
        wanted = judgment.case_id.strip()
        if wanted in existing:
            raise EvalSetError(f"{path}: case '{wanted}': field 'id' is already used in this set")
        return wanted
    return suggest_case_id(judgment.query, existing)


def _validated(
    path: Path, text: str, case_id: str, judgment: Judgment, known_ids: Iterable[str] | None, *, before: EvalSet | None
) -> EvalSet:
    """The eval set `text` would be at `path`, loaded like every eval set; errors name `path`, not the scratch file."""
    scratch = path.parent / f".{path.name}.{os.getpid()}.judging"
    try:
        scratch.write_text(text, encoding="utf-8", newline="")
        try:
            loaded = load_eval_set(scratch)
        except EvalSetError as exc:
            raise EvalSetError(str(exc).replace(str(scratch), str(path))) from exc
    except OSError as exc:
        raise EvalSetError(f"{path}: cannot be written: {exc.strerror or exc}") from exc
    finally:
        scratch.unlink(missing_ok=True)
    loaded = replace(loaded, path=str(path), name=path.stem if loaded.name == scratch.stem else loaded.name)
    new = loaded.cases[-1]
    where = f"{path}: case '{case_id}'"
    if (
        new.id != case_id
        or new.query != judgment.query.strip()
        or set(new.expected) != set(judgment.relevant)
        or set(new.not_relevant) != set(judgment.not_relevant)
    ):
        raise EvalSetError(f"{where}: the appended text does not read back as this case; add it by hand")
    if before is not None and (
        loaded.cases[:-1] != before.cases or (loaded.name, loaded.corpus_dir) != (before.name, before.corpus_dir)
    ):
        raise EvalSetError(f"{path}: field 'cases': appending would change the other cases; add the case by hand")
    if known_ids is not None:
        known = set(known_ids)
        for name, ids in (("expected", new.expected), ("not_relevant", new.not_relevant)):
            unknown = sorted(set(ids) - known)
            if unknown:
                raise EvalSetError(f"{where}: field '{name}' names entry ids the corpus does not have: {', '.join(unknown)}")
    return loaded


def _replace(path: Path, data: bytes) -> None:
    """Write `data` to a sibling file and rename it over `path` (atomic: readers see the old or the new file)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(data)
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EvalSetError(f"{path}: cannot be written: {exc.strerror or exc}") from exc
