"""Eval sets: YAML files of cases {id, query, expected, domain, not_relevant, invocation}, validated with clear errors.
Judged: an entry a case lists (expected at any grade, not_relevant), every entry of a case with no right answer, and
every entry of a set that says `judged: complete` (an entry a case does not list is judged not relevant)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from retrieval.core.lookup import clean_query
from retrieval.errors import EvalSetError, QueryError


@dataclass(frozen=True)
class EvalCase:
    id: str
    query: str
    expected: dict[str, int]  # entry id -> relevance grade (1 for a plain list); empty: no right answer
    domain: str | None = None
    not_relevant: tuple[str, ...] = ()  # entries a person judged not relevant (the shown results left unmarked)
    invocation: str | None = None  # the recorded call it was judged from

    @property
    def answerable(self) -> bool:
        return bool(self.expected)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "query": self.query, "expected": dict(self.expected), "domain": self.domain}
        if self.not_relevant:  # only when given: the content hash of a set without them stays as it was
            out["not_relevant"] = list(self.not_relevant)
        if self.invocation:
            out["invocation"] = self.invocation
        return out


JUDGED_LISTED, JUDGED_COMPLETE = "listed", "complete"  # the values of a set's `judged` field


@dataclass(frozen=True)
class EvalSet:
    name: str
    description: str
    path: str
    corpus_dir: Path | None
    cases: tuple[EvalCase, ...]
    judged: str = JUDGED_LISTED  # complete: every entry a case does not list is judged not relevant

    @property
    def complete(self) -> bool:
        return self.judged == JUDGED_COMPLETE

    def case(self, case_id: str) -> EvalCase:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)


@dataclass(frozen=True)
class CorpusFit:
    """Whether an eval set's expected entries exist in a corpus: the distinct ids it expects, those missing."""

    expected: int
    missing: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.missing


def corpus_fit(eval_set: EvalSet, known_ids: Iterable[str]) -> CorpusFit:
    """Fit by entry ids, not by the corpus path the set names: the same corpus reached through another path fits."""
    known = set(known_ids)
    wanted = sorted({entry_id for case in eval_set.cases for entry_id in case.expected})
    return CorpusFit(len(wanted), tuple(e for e in wanted if e not in known))


def _expected(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        raise EvalSetError(f"{where}: field 'expected' is missing (use [] when the corpus has no right answer)")
    if isinstance(raw, list):
        out = {}
        for item in raw:
            if not isinstance(item, str) or not item.strip():
                raise EvalSetError(f"{where}: field 'expected' must list entry ids as strings, found {item!r}")
            out[item.strip()] = 1
        return out
    if isinstance(raw, dict):
        out = {}
        for key, grade in raw.items():
            if not isinstance(key, str) or isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                raise EvalSetError(f"{where}: field 'expected' grades must be whole numbers >= 0, found {key!r}: {grade!r}")
            out[key] = grade
        return out
    raise EvalSetError(f"{where}: field 'expected' must be a list of entry ids or a mapping id: grade, got {type(raw).__name__}")


def load_eval_set(path: Path | str, *, known_ids: Iterable[str] | None = None) -> EvalSet:
    """Read and validate one eval set. `known_ids` (the corpus's entry ids) turns on the unknown-id check."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EvalSetError(f"{path}: eval set not found") from exc
    except OSError as exc:
        raise EvalSetError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise EvalSetError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(data, dict):
        raise EvalSetError(f"{path}: expected a mapping with 'name' and 'cases', got {type(data).__name__}")
    cases_raw = data.get("cases")
    if not isinstance(cases_raw, list) or not cases_raw:
        raise EvalSetError(f"{path}: field 'cases' must be a non-empty list")
    known = set(known_ids) if known_ids is not None else None
    cases, seen = [], set()
    for i, raw in enumerate(cases_raw):
        case = _case(raw, f"{path}: case #{i + 1}", str(path), known)
        if case.id in seen:
            raise EvalSetError(f"{path}: case '{case.id}': duplicate case id")
        seen.add(case.id)
        cases.append(case)
    corpus = data.get("corpus")
    if corpus is not None and not isinstance(corpus, str):
        raise EvalSetError(f"{path}: field 'corpus' must be a path, got {type(corpus).__name__}")
    try:
        corpus_dir = (path.parent / corpus).resolve() if corpus else None
    except (OSError, ValueError) as exc:
        raise EvalSetError(f"{path}: field 'corpus' is not a usable path: {corpus!r}: {exc}") from exc
    name, description = data.get("name"), data.get("description")
    return EvalSet(
        name=_text(name, str(path), "name") if name is not None and str(name).strip() else path.stem,
        description=_text(description, str(path), "description") if description is not None else "",
        path=str(path),
        corpus_dir=corpus_dir,
        cases=tuple(cases),
        judged=_judged(data.get("judged"), path),
    )


def _judged(value: Any, path: Path) -> str:
    if value is None:
        return JUDGED_LISTED
    if value not in (JUDGED_LISTED, JUDGED_COMPLETE):
        raise EvalSetError(
            f"{path}: field 'judged' must be '{JUDGED_COMPLETE}' (every entry a case does not list is judged not "
            f"relevant) or '{JUDGED_LISTED}' (only the entries a case lists), got {value!r}"
        )
    return str(value)


def _case(raw: Any, where: str, path: str, known: set[str] | None) -> EvalCase:
    """One case of the file, validated; errors name the file, the case and the field."""
    if not isinstance(raw, dict):
        raise EvalSetError(f"{where}: expected a mapping, got {type(raw).__name__}")
    case_id = raw.get("id")
    if case_id is None or not str(case_id).strip():
        raise EvalSetError(f"{where}: field 'id' is missing")
    case_id = _text(case_id, where, "id")
    where = f"{path}: case '{case_id}'"
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        raise EvalSetError(f"{where}: field 'query' must be non-empty text, got {query!r}")
    try:
        clean_query(query)  # refused here, naming the case, rather than midway through a run
    except QueryError as exc:
        raise EvalSetError(f"{where}: field 'query': {exc}") from exc
    expected = _expected(raw.get("expected"), where)
    not_relevant = _not_relevant(raw.get("not_relevant"), expected, where)
    if known is not None:
        for name, ids in (("expected", expected), ("not_relevant", not_relevant)):
            unknown = sorted(set(ids) - known)
            if unknown:
                raise EvalSetError(f"{where}: field '{name}' names entry ids the corpus does not have: {', '.join(unknown)}")
    domain = raw.get("domain")
    if domain is not None and not isinstance(domain, str):
        raise EvalSetError(f"{where}: field 'domain' must be text, got {type(domain).__name__}")
    invocation = raw.get("invocation")
    invocation = _text(invocation, where, "invocation") if invocation is not None else None
    return EvalCase(case_id, query.strip(), expected, (domain or "").strip() or None, not_relevant, invocation or None)


def _not_relevant(raw: Any, expected: dict[str, int], where: str) -> tuple[str, ...]:
    """The entries judged not relevant: a list of ids, none of them expected as relevant."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) and item.strip() for item in raw):
        raise EvalSetError(f"{where}: field 'not_relevant' must list entry ids as strings, found {raw!r}")
    ids = tuple(dict.fromkeys(item.strip() for item in raw))
    both = [e for e in ids if expected.get(e, 0) > 0]
    if both:
        raise EvalSetError(f"{where}: field 'not_relevant' names entries 'expected' calls relevant: {', '.join(both)}")
    return ids


def _text(value: Any, where: str, name: str) -> str:
    """A text field; YAML numbers (id: 7) are taken as their text, lists, mappings and booleans are refused."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise EvalSetError(f"{where}: field '{name}' must be text, got {type(value).__name__} {value!r}")
    return str(value).strip()
