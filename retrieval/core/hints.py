"""L0: the keyword/frontmatter matcher. It gives explainable hint data, never the final answer on its own.

Patterns come from each entry's title, CamelCase file name, keywords (tags, aliases) and entities. All of
them go into one Aho-Corasick automaton built once per corpus, so matching a query costs the same however
many keywords the corpus has.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ahocorasick
import numpy as np

from retrieval.core.corpus import Entry
from retrieval.core.text import Spans, content_spans, content_tokens

# Field weights: a whole title or curated keyword says more than a word from the file name.
FIELD_WEIGHT = {"title": 1.0, "keyword": 1.2, "entity": 1.0, "name": 0.8, "domain": 0.6}
MAX_NGRAM = 3
# A single word found in more than this share of entries says little; it is not a pattern on its own.
COMMON_WORD_SHARE = 0.08
# Entries scoring at least this share of the best score stay in the hint set, and their domains in the
# hint domains. Lower keeps more domains, so a query whose evidence points at several stays unfiltered:
# on the shared runbooks and kubevirt summaries, 0.5 filtered 4 and 2 cases away from every right entry
# (routing accuracy 0.942 / 0.949); 0.3 filters fewer (57 % and 45 % of cases) with none hurt.
KEEP_RATIO = 0.3
# Entries listed as matches at most. A term shared by thousands of entries ties them all; every one of
# them still counts for the domains, keywords and entities, but only the best are listed (and recorded).
# No case of the shared eval sets lists more than 16; the lookup ranks the best top_k (10) of them.
MAX_MATCHES = 30
# A term that points at more entries than this is common: it carries little evidence (its IDF weight is low)
# and scoring every entry it ties would make L0 grow with the corpus. It brings in only its first
# COMMON_POSTINGS entries (in corpus order; and as many in each domain the query names), and adds its weight
# to every entry another term brings in. The hints list such terms, with how many entries each points at.
COMMON_POSTINGS = 1000


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
class _Pattern:
    display: str
    field: str
    entry_ids: tuple[str, ...]
    weight: float
    term: TermMatch  # built once here; a match gives it the query's words
    rows: np.ndarray = dataclasses.field(compare=False, repr=False)  # positions of entry_ids in the index, sorted
    # The rows it brings in as a candidate: all of them, or, for a common pattern, the first COMMON_POSTINGS
    # (and per domain code the first COMMON_POSTINGS in that domain).
    head: np.ndarray = dataclasses.field(compare=False, repr=False, default_factory=lambda: np.zeros(0, np.int32))
    head_in: dict[int, np.ndarray] = dataclasses.field(compare=False, repr=False, default_factory=dict)
    bits: np.ndarray | None = dataclasses.field(compare=False, repr=False, default=None)  # a common one's rows, a bitmap

    @property
    def common(self) -> bool:
        return self.bits is not None


def _ngrams(text: str, *, whole_words: bool) -> Iterable[tuple[str, str]]:
    """(match key, text as written) of every n-gram of the content tokens of `text`, n up to MAX_NGRAM. The
    text as written is the span of the n-gram's words (whole_words), or of its CamelCase parts (a file name)."""
    spans = content_spans(text)
    words = [t.key for t in spans.tokens]
    for n in range(1, MAX_NGRAM + 1):
        for i in range(len(words) - n + 1):
            yield " ".join(words[i : i + n]), spans.surface(i, i + n - 1, whole_words=whole_words)


def _key(text: str) -> str:
    """The match key of a phrase: its content tokens, as the query is reduced to them too."""
    return " ".join(content_tokens(text))


def named_keys(entry: Entry) -> tuple[str, ...]:
    """The match keys that name `entry` in full: its whole title and its whole file name, each of at least
    two content tokens (a one-word title such as "Overview" names nothing)."""
    keys = dict.fromkeys(k for k in (_key(entry.title), _key(entry.name)) if len(k.split()) >= 2)
    return tuple(keys)


def _entry_terms(entry: Entry) -> Iterable[tuple[str, str, str]]:
    """(match key, field, display text as written in the entry) for one entry."""
    for gram, written in _ngrams(entry.title, whole_words=True):
        yield gram, "title", written
    if _key(entry.name) != _key(entry.title):
        for gram, written in _ngrams(entry.name, whole_words=False):
            if len(gram.split()) > 1:
                yield gram, "name", written
        yield _key(entry.name), "name", entry.name
    for kw in entry.keywords:
        yield _key(kw), "keyword", kw
    for ent in entry.entities:
        yield _key(ent), "entity", ent
    yield _key(entry.domain), "domain", entry.domain


class L0Index:
    """The L0 matcher over one corpus. Build once; `match` is read-only and thread-safe."""

    def __init__(self, entries: Iterable[Entry], *, common_postings: int = COMMON_POSTINGS) -> None:
        self.common_postings = common_postings
        self.entries = {e.entry_id: e for e in entries}
        self._by_row = list(self.entries.values())
        self._named = [tuple(f" {k} " for k in named_keys(e)) for e in self._by_row]
        self._per_domain = Counter(e.domain for e in self._by_row)
        row_of = {entry_id: i for i, entry_id in enumerate(self.entries)}
        self._domain_codes: dict[str, int] = {}
        self._domain_of_row = np.array(
            [self._domain_codes.setdefault(_key(e.domain), len(self._domain_codes)) for e in self._by_row], dtype=np.int32
        )
        raw_codes: dict[str, int] = {}  # the domain as written, for the hint list
        self._raw_domain_of_row = np.array([raw_codes.setdefault(e.domain, len(raw_codes)) for e in self._by_row], dtype=np.int32)
        self._raw_domains = list(raw_codes)
        self._id_rank = np.empty(len(self._by_row), dtype=np.int64)  # row -> position in entry id order
        self._id_rank[sorted(range(len(self._by_row)), key=lambda i: self._by_row[i].entry_id)] = np.arange(len(self._by_row))
        n = max(len(self.entries), 1)
        raw: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)  # (pattern, field) -> {entry_id: display}
        for entry in self.entries.values():
            for pattern, field_name, display in _entry_terms(entry):
                if pattern:
                    raw[(pattern, field_name)].setdefault(entry.entry_id, display)
        # Document frequency per pattern across fields, for an IDF weight.
        df: dict[str, set[str]] = defaultdict(set)
        for (pattern, _), ids in raw.items():
            df[pattern].update(ids)
        self._automaton = ahocorasick.Automaton()
        by_pattern: dict[str, list[_Pattern]] = defaultdict(list)
        for (pattern, field_name), ids in sorted(raw.items()):
            words = pattern.split()
            if len(words) == 1 and field_name in ("title", "name") and len(df[pattern]) > max(2, COMMON_WORD_SHARE * n):
                continue
            idf = math.log(1 + n / len(df[pattern]))
            weight = FIELD_WEIGHT[field_name] * idf * (1 + 0.5 * (len(words) - 1))
            display = sorted(ids.values())[0]
            rows = np.array(sorted(row_of[i] for i in ids), dtype=np.int32)
            head, head_in, bits = self._heads(rows)
            by_pattern[pattern].append(
                _Pattern(
                    display,
                    field_name,
                    tuple(sorted(ids)),
                    weight,
                    TermMatch(display, field_name, weight, pattern),
                    rows,
                    head,
                    head_in,
                    bits,
                )
            )
        for pattern, pats in by_pattern.items():
            self._automaton.add_word(f" {pattern} ", (pattern, tuple(pats)))
        self.pattern_count = len(by_pattern)
        if by_pattern:
            self._automaton.make_automaton()

    def _heads(self, rows: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray], np.ndarray | None]:
        """The rows a pattern brings in as candidates (see COMMON_POSTINGS): all, or the first of the corpus and
        of each domain; and for a common pattern its rows as a bitmap (which candidates it holds, in one pass)."""
        cap = self.common_postings
        if len(rows) <= cap:
            return rows, {}, None
        codes = self._domain_of_row[rows]
        order = np.argsort(codes, kind="stable")  # by domain, each in row order
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        head_in = {int(codes[part[0]]): rows[np.sort(part[:cap])] for part in np.split(order, bounds)}
        mask = np.zeros(len(self._by_row), dtype=bool)
        mask[rows] = True
        return rows[:cap], head_in, np.packbits(mask)

    def entry_count(self, domain: str | None = None) -> int:
        """Entries in `domain` (as the L1 category filter names it), or in the whole corpus for None."""
        return len(self._by_row) if domain is None else self._per_domain.get(domain, 0)

    def index_terms(self, entry_id: str) -> list[dict[str, Any]]:
        """The patterns that point at one entry (for the corpus browser): each as this entry writes it,
        with its match key."""
        entry = self.entries.get(entry_id)
        if entry is None or not self.pattern_count:
            return []
        written: dict[tuple[str, str], str] = {}
        for pattern, field_name, display in _entry_terms(entry):
            if pattern:
                written.setdefault((pattern, field_name), display)
        out = []
        for pattern in dict.fromkeys(p for p, _ in written):
            _, pats = self._automaton.get(f" {pattern} ", (None, ()))
            for p in pats:
                if entry_id in p.entry_ids:
                    out.append(
                        {"term": written[(pattern, p.field)], "field": p.field, "weight": round(p.weight, 3), "key": pattern}
                    )
        return sorted(out, key=lambda d: (-d["weight"], d["key"], d["field"]))

    def match(self, query: str, *, keep_ratio: float = KEEP_RATIO, max_matches: int = MAX_MATCHES) -> L0Hints:
        """Match `query` against every pattern at once and return the hint data."""
        spans = content_spans(query)
        keys = [t.key for t in spans.tokens]
        haystack = f" {' '.join(keys)} "
        found: dict[str, tuple[_Pattern, ...]] = {}
        if self.pattern_count and haystack.strip():
            for _, (pattern, pats) in self._automaton.iter(haystack):
                found[pattern] = pats
        # Each matched term as the query writes it (the first place it holds the term's key)
        written = {pattern: _as_written(pattern.split(), keys, spans) for pattern in found}
        terms = _Terms(written)  # made for the patterns shown only: a query can hit hundreds
        # Rough scores of the candidate entries come from numpy, so the Python work (and the time) follows the
        # entries that can pass keep_ratio, not the thousands a common word points at. Scores of those are
        # then summed exactly as always, in term order.
        pats = [p for pattern in sorted(found) for p in found[pattern] if p.field != "domain"]
        domain_terms = {
            self._domain_codes[pattern]: terms.of(p) for pattern in found for p in found[pattern] if p.field == "domain"
        }
        scored = []
        candidates, beyond = self._candidates(pats, terms, domain_terms, keep_ratio, max_matches)
        for row, row_terms in candidates.items():
            entry = self._by_row[row]
            ordered = tuple(sorted(row_terms, key=lambda t: (-t.weight, t.key, t.field)))
            named = any(k in haystack for k in self._named[row])
            scored.append(EntryMatch(entry.entry_id, entry.title, entry.domain, sum(t.weight for t in ordered), ordered, named))
        scored.sort(key=lambda m: (-m.score, m.entry_id))
        if scored:
            best = scored[0].score
            scored = [m for m in scored if m.score >= keep_ratio * best]
        common = tuple(sorted({(p.term.key, len(p.rows)) for p in pats if p.common}, key=lambda kn: (-kn[1], kn[0])))
        return _hints(query, scored, self._named_domains(found), beyond, common)

    def _candidates(
        self,
        pats: list[_Pattern],
        terms: _Terms,
        domain_terms: dict[int, TermMatch],
        keep_ratio: float,
        max_matches: int,
    ) -> tuple[dict[int, list[TermMatch]], _Beyond | None]:
        """Row -> matched terms, for the entries whose rough score reaches keep_ratio of the best (the best
        max_matches of them), and, when there were more, what all of them add up to.

        Only entries that a non-domain pattern brings in count: a domain word alone never makes a match. The
        candidates are the entries of the query's rare patterns; with none, the heads of its common ones (see
        COMMON_POSTINGS). A common pattern adds its weight to every candidate it holds."""
        if not pats:
            return {}, None
        rare = [p for p in pats if not p.common]
        if rare:
            heads = [p.rows for p in rare]
        else:  # common terms alone: their first entries, and the first of each domain the query names
            heads = [p.head for p in pats] + [h for p in pats for code in domain_terms if (h := p.head_in.get(code)) is not None]
        rows = np.sort(np.concatenate(heads))  # candidate rows, sorted, once each (np.unique hashes: slower here)
        rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
        # holds[i, j]: pattern i points at candidate j. A rare pattern's rows are all candidates (one search
        # for all of them); a common one's bitmap is read at the candidates (its postings are not scanned).
        holds = np.zeros((len(pats), len(rows)), dtype=bool)
        hit_of = {}
        if rare:
            at = np.searchsorted(rows, np.concatenate(heads))
            hit_of = dict(zip(map(id, rare), np.split(at, np.cumsum([len(p.rows) for p in rare])[:-1]), strict=True))
        for i, p in enumerate(pats):
            if p.bits is not None:
                holds[i] = (p.bits[rows >> 3] >> (7 - (rows & 7))) & 1
            else:
                holds[i, hit_of[id(p)]] = True
        weights = np.array([p.weight for p in pats])
        rough = weights @ holds
        codes = self._domain_of_row[rows]
        for code, domain_term in domain_terms.items():
            rough[codes == code] += domain_term.weight
        keep = np.flatnonzero(rough >= keep_ratio * rough.max() * (1 - 1e-9))  # below any exact score that can pass
        beyond = None
        if len(keep) > max_matches:
            keep, beyond = self._cap(rows, keep, rough[keep], holds, pats, terms, domain_terms, max_matches)
        out: dict[int, list[TermMatch]] = {}
        for j in keep.tolist():
            row_terms = [terms.of(pats[i]) for i in np.flatnonzero(holds[:, j]).tolist()]
            term = domain_terms.get(int(codes[j]))
            if term is not None:
                row_terms.append(term)
            out[int(rows[j])] = row_terms
        return out, beyond

    def _cap(
        self,
        rows: np.ndarray,
        keep: np.ndarray,
        scores: np.ndarray,
        holds: np.ndarray,
        pats: list[_Pattern],
        terms: _Terms,
        domain_terms: dict[int, TermMatch],
        max_matches: int,
    ) -> tuple[np.ndarray, _Beyond]:
        """The best max_matches of the candidates `keep` (positions in `rows`, sorted), and the domains and terms
        of all of them."""
        order = np.lexsort((self._id_rank[rows[keep]], -scores))  # best first, then by entry id
        codes = self._raw_domain_of_row[rows[keep[order]]]
        _, first = np.unique(codes, return_index=True)
        domains = tuple(d for d in (self._raw_domains[codes[i]] for i in np.sort(first)) if d.strip())
        kept_terms = [terms.of(pats[i]) for i in np.flatnonzero(holds[:, keep].any(axis=1)).tolist()]
        present = set(self._domain_of_row[rows[keep]].tolist())
        kept_terms += [t for code, t in domain_terms.items() if code in present]
        return np.sort(keep[order[:max_matches]]), _Beyond(len(keep), domains, tuple(kept_terms))

    @staticmethod
    def _named_domains(found: dict[str, tuple[_Pattern, ...]]) -> list[str]:
        """Domains the query names outright ('prometheus', 'etcd'), longest names first, none inside another."""
        named = sorted(
            ((pattern, p.display) for pattern, pats in found.items() for p in pats if p.field == "domain"),
            key=lambda pd: (-len(pd[0]), pd[0]),
        )
        kept: list[tuple[str, str]] = []
        for pattern, display in named:
            if not any(f" {pattern} " in f" {longer} " for longer, _ in kept):
                kept.append((pattern, display))
        return [display for _, display in kept]


def _as_written(words: list[str], keys: list[str], spans: Spans) -> str:
    """The query's text from the first place its content tokens `keys` hold the sequence `words`, as the query
    writes it (CamelCase parts, not whole words: "etcd" of "etcdMembersDown")."""
    n = len(words)
    for i in range(len(keys) - n + 1):
        if keys[i : i + n] == words:
            return spans.surface(i, i + n - 1, whole_words=False)
    return " ".join(words)  # not reached: the automaton found the key in these tokens


class _Terms:
    """Each matched pattern's TermMatch for one query (the query's words, the pattern's field, weight and key),
    made when first asked for."""

    def __init__(self, written: dict[str, str]) -> None:
        self.written = written
        self._made: dict[int, TermMatch] = {}

    def of(self, p: _Pattern) -> TermMatch:
        term = self._made.get(id(p))
        if term is None:
            key = p.term.key
            term = self._made[id(p)] = TermMatch(self.written[key], p.field, p.weight, key)
        return term


@dataclass(frozen=True)
class _Beyond:
    """What every entry that passed the keep ratio adds up to, when only the best are listed."""

    total: int
    domains: tuple[str, ...]  # best entry first
    terms: tuple[TermMatch, ...]


def _hints(
    query: str,
    matches: list[EntryMatch],
    named_domains: list[str],
    beyond: _Beyond | None = None,
    common: tuple[tuple[str, int], ...] = (),
) -> L0Hints:
    """Domains are those of the matched entries, plus any the query names outright: a query that names
    another domain than its keyword matches is ambiguous, and must not be narrowed to one of them."""
    titles, domains, entities = [], [], []
    keywords: dict[tuple[str, str], TermMatch] = {}  # by (match key, field)
    every_term = [t for m in matches for t in m.terms] + list(beyond.terms if beyond else ())
    for m in matches:
        if any(t.field in ("title", "name") for t in m.terms) and m.title not in titles:
            titles.append(m.title)
        if m.domain.strip() and m.domain not in domains:
            domains.append(m.domain)
    if beyond is not None:
        domains.extend(d for d in beyond.domains if d not in domains)
    for t in every_term:
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
