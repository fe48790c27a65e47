"""Eval sets: YAML files of cases {id, query, expected, domain}, validated with clear errors."""

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

    @property
    def answerable(self) -> bool:
        return bool(self.expected)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "query": self.query, "expected": dict(self.expected), "domain": self.domain}


@dataclass(frozen=True)
class EvalSet:
    name: str
    description: str
    path: str
    corpus_dir: Path | None
    cases: tuple[EvalCase, ...]

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
        where = f"{path}: case #{i + 1}"
        if not isinstance(raw, dict):
            raise EvalSetError(f"{where}: expected a mapping, got {type(raw).__name__}")
        case_id = raw.get("id")
        if case_id is None or not str(case_id).strip():
            raise EvalSetError(f"{where}: field 'id' is missing")
        case_id = _text(case_id, where, "id")
        where = f"{path}: case '{case_id}'"
        if case_id in seen:
            raise EvalSetError(f"{where}: duplicate case id")
        seen.add(case_id)
        query = raw.get("query")
        if not isinstance(query, str) or not query.strip():
            raise EvalSetError(f"{where}: field 'query' must be non-empty text, got {query!r}")
        try:
            clean_query(query)  # refused here, naming the case, rather than midway through a run
        except QueryError as exc:
            raise EvalSetError(f"{where}: field 'query': {exc}") from exc
        expected = _expected(raw.get("expected"), where)
        if known is not None:
            unknown = sorted(set(expected) - known)
            if unknown:
                raise EvalSetError(f"{where}: field 'expected' names entry ids the corpus does not have: {', '.join(unknown)}")
        domain = raw.get("domain")
        if domain is not None and not isinstance(domain, str):
            raise EvalSetError(f"{where}: field 'domain' must be text, got {type(domain).__name__}")
        cases.append(EvalCase(case_id, query.strip(), expected, (domain or "").strip() or None))
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
    )


def _text(value: Any, where: str, name: str) -> str:
    """A text field; YAML numbers (id: 7) are taken as their text, lists, mappings and booleans are refused."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise EvalSetError(f"{where}: field '{name}' must be text, got {type(value).__name__} {value!r}")
    return str(value).strip()
