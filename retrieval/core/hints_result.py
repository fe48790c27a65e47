"""The L0 hint data: the terms and entries a query matched, and the hints built from them (`L0Index.match`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TermMatch:
    """One matched term: the query's words that matched, as the query writes them ("PostgreSQL replication",
    "etcd" of "etcd cluster has no leader"), the entry field the term came from, its weight, and the
    normalised key L0 matched on ("postgr sql replication"). How each entry writes it: `L0Index.index_terms`."""

    term: str
    field: str
    weight: float
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"term": self.term, "field": self.field, "weight": round(self.weight, 4), "key": self.key}


@dataclass(frozen=True)
class EntryMatch:
    """An entry L0 matched, with its score and the terms (and fields) that matched. `named`: the query
    holds the entry's whole title or whole file name (see `named_keys`), as an alert notification holds
    its alert's name."""

    entry_id: str
    title: str
    domain: str
    score: float
    terms: tuple[TermMatch, ...]
    named: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(sorted({t.field for t in self.terms}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "score": round(self.score, 4),
            "named": self.named,
            "fields": list(self.fields),
            "terms": [t.to_dict() for t in self.terms],
        }


@dataclass(frozen=True)
class L0Hints:
    """Structured L0 hint data for one query."""

    query: str
    matched_titles: tuple[str, ...]
    matched_keywords: tuple[TermMatch, ...]
    domains: tuple[str, ...]
    entities: tuple[str, ...]
    matches: tuple[EntryMatch, ...]  # the best MAX_MATCHES of them
    total_matches: int = -1  # entries that passed the keep ratio (-1: as many as listed)
    common_terms: tuple[tuple[str, int], ...] = ()  # (match key, entries it points at) of terms over COMMON_POSTINGS

    @property
    def has_match(self) -> bool:
        return bool(self.matches)

    @property
    def match_count(self) -> int:
        return len(self.matches) if self.total_matches < 0 else self.total_matches

    def to_dict(self) -> dict[str, Any]:
        out = {
            "matched_titles": list(self.matched_titles),
            "matched_keywords": [k.to_dict() for k in self.matched_keywords],
            "domains": list(self.domains),
            "entities": list(self.entities),
            "matches": [m.to_dict() for m in self.matches],
            "total_matches": self.match_count,
        }
        if self.common_terms:  # only where a term was common: the hints of small corpora keep their shape
            out["common_terms"] = [{"key": key, "entries": n} for key, n in self.common_terms]
        return out


@dataclass(frozen=True)
class Beyond:
    """What every entry that passed the keep ratio adds up to, when only the best are listed."""

    total: int
    domains: tuple[str, ...]  # best entry first
    terms: tuple[TermMatch, ...]


def build_hints(
    query: str,
    matches: list[EntryMatch],
    named_domains: list[str],
    beyond: Beyond | None = None,
    common: tuple[tuple[str, int], ...] = (),
) -> L0Hints:
    """Domains are those of the matched entries, plus any the query names outright: a query that names
    another domain than its keyword matches is ambiguous, and must not be narrowed to one of them."""
    titles, domains, entities = [], [], []
    keywords: dict[tuple[str, str], TermMatch] = {}  # by (match key, field)
    # Entries that hold the same terms share one tuple of them (L0Index._candidates): each tuple is read once,
    # which gives what reading every entry's would (the same first places, the same heaviest terms).
    groups: dict[int, tuple[tuple[TermMatch, ...], bool]] = {}  # each tuple, and whether it holds a title term
    for m in matches:
        group = groups.get(id(m.terms))
        if group is None:
            group = groups[id(m.terms)] = (m.terms, any(t.field in ("title", "name") for t in m.terms))
        if group[1] and m.title not in titles:
            titles.append(m.title)
        if m.domain.strip() and m.domain not in domains:
            domains.append(m.domain)
    if beyond is not None:
        domains.extend(d for d in beyond.domains if d not in domains)
    for t in [t for terms, _ in groups.values() for t in terms] + list(beyond.terms if beyond else ()):
        if t.field == "entity" and t.term not in entities:
            entities.append(t.term)
        key = (t.key, t.field)
        if key not in keywords or keywords[key].weight < t.weight:
            keywords[key] = t
    if matches:
        domains.extend(d for d in named_domains if d not in domains)
    ordered_kw = tuple(sorted(keywords.values(), key=lambda t: (-t.weight, t.key, t.field)))
    return L0Hints(
        query, tuple(titles), ordered_kw, tuple(domains), tuple(entities), tuple(matches), beyond.total if beyond else -1, common
    )
