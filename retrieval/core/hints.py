"""L0: the keyword/frontmatter matcher. It gives explainable hint data, never the final answer on its own.
Titles, file names, keywords and entities go into one Aho-Corasick automaton per corpus, so a match costs the same
however many keywords the corpus has.
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
from retrieval.core.hints_result import Beyond, EntryMatch, L0Hints, TermMatch, build_hints
from retrieval.core.hints_terms import QueryTerms, entry_terms, match_key, named_keys
from retrieval.core.text import content_spans

__all__ = ["EntryMatch", "L0Hints", "L0Index", "TermMatch", "named_keys"]

# Field weights: a whole title or curated keyword says more than a word from the file name.
FIELD_WEIGHT = {"title": 1.0, "keyword": 1.2, "entity": 1.0, "name": 0.8, "domain": 0.6}
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
# Up to this many entries past the keep ratio, `_cap` sorts them all; beyond, it selects without sorting.
FULL_SORT_UP_TO = 512


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


class L0Index:
    """The L0 matcher over one corpus. Build once; `match` is read-only and thread-safe."""

    def __init__(self, entries: Iterable[Entry], *, common_postings: int = COMMON_POSTINGS) -> None:
        self.common_postings = common_postings
        self.entries = {e.entry_id: e for e in entries}
        self._by_row = list(self.entries.values())
        self._named = [tuple(f" {k} " for k in named_keys(e)) for e in self._by_row]
        self._per_domain = Counter(e.domain for e in self._by_row)
        row_of = self._row_of = {entry_id: i for i, entry_id in enumerate(self.entries)}
        self._domain_codes: dict[str, int] = {}
        self._domain_of_row = np.array(
            [self._domain_codes.setdefault(match_key(e.domain), len(self._domain_codes)) for e in self._by_row], dtype=np.int32
        )
        raw_codes: dict[str, int] = {}  # the domain as written, for the hint list
        self._raw_domain_of_row = np.array([raw_codes.setdefault(e.domain, len(raw_codes)) for e in self._by_row], dtype=np.int32)
        self._raw_domains = list(raw_codes)
        self._id_rank = np.empty(len(self._by_row), dtype=np.int64)  # row -> position in entry id order
        self._id_rank[sorted(range(len(self._by_row)), key=lambda i: self._by_row[i].entry_id)] = np.arange(len(self._by_row))
        n = max(len(self.entries), 1)
        raw: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)  # (pattern, field) -> {entry_id: display}
        for entry in self.entries.values():
            for pattern, field_name, display in entry_terms(entry):
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
        for pattern, field_name, display in entry_terms(entry):
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

    def match(
        self, query: str, *, keep_ratio: float = KEEP_RATIO, max_matches: int = MAX_MATCHES, exclude: str | None = None
    ) -> L0Hints:
        """Match `query` against every pattern at once and return the hint data. `exclude`: an entry id matched as if
        the corpus did not hold it (a probe of the support calibration asks what its entry's siblings get)."""
        spans = content_spans(query)
        keys = [t.key for t in spans.tokens]
        haystack = f" {' '.join(keys)} "
        found: dict[str, tuple[_Pattern, ...]] = {}
        if self.pattern_count and haystack.strip():
            for _, (pattern, pats) in self._automaton.iter(haystack):
                found[pattern] = pats
        # Each matched term as the query writes it (the first place it holds the term's key)
        terms = QueryTerms(keys, spans)  # made for the patterns shown only: a query can hit hundreds
        # Rough scores of the candidate entries come from numpy, so the Python work (and the time) follows the
        # entries that can pass keep_ratio, not the thousands a common word points at. Scores of those are
        # then summed exactly as always, in term order.
        pats = [p for pattern in sorted(found) for p in found[pattern] if p.field != "domain"]
        domain_terms = {
            self._domain_codes[pattern]: terms.of(p.term) for pattern in found for p in found[pattern] if p.field == "domain"
        }
        skip = self._row_of.get(exclude) if exclude is not None else None
        candidates, beyond = self._candidates(pats, terms, domain_terms, keep_ratio, max_matches, skip)
        scored = []
        for row, (ordered, score) in candidates:
            entry = self._by_row[row]
            named = any(k in haystack for k in self._named[row])
            scored.append(EntryMatch(entry.entry_id, entry.title, entry.domain, score, ordered, named))
        scored.sort(key=lambda m: (-m.score, m.entry_id))
        if scored:
            best = scored[0].score
            scored = [m for m in scored if m.score >= keep_ratio * best]
        common = tuple(sorted({(p.term.key, len(p.rows)) for p in pats if p.common}, key=lambda kn: (-kn[1], kn[0])))
        return build_hints(query, scored, self._named_domains(found), beyond, common)

    def _candidates(
        self,
        pats: list[_Pattern],
        terms: QueryTerms,
        domain_terms: dict[int, TermMatch],
        keep_ratio: float,
        max_matches: int,
        skip: int | None = None,
    ) -> tuple[list[tuple[int, tuple[tuple[TermMatch, ...], float]]], Beyond | None]:
        """(row, (matched terms best first, summed weight)) of the entries whose rough score reaches keep_ratio of the best (at
        most max_matches), and what all of them add up to when there were more. Only non-domain patterns bring entries
        in: the rare patterns' entries, else the heads of the common ones (COMMON_POSTINGS)."""
        if not pats:
            return [], None
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
        byte, shift = rows >> 3, (7 - (rows & 7)).astype(np.uint8)  # where a common pattern's bitmap holds each row
        for i, p in enumerate(pats):
            if p.bits is not None:
                holds[i] = (p.bits[byte] >> shift) & 1
            else:
                holds[i, hit_of[id(p)]] = True
        weights = np.array([p.weight for p in pats])
        rough = weights @ holds
        codes = self._domain_of_row[rows]
        for code, domain_term in domain_terms.items():
            rough[codes == code] += domain_term.weight
        if skip is not None:
            rough[rows == skip] = -np.inf  # an excluded entry is no candidate
            if not np.isfinite(rough).any():
                return [], None
        keep = np.flatnonzero(rough >= keep_ratio * rough.max() * (1 - 1e-9))  # below any exact score that can pass
        beyond = None
        if len(keep) > max_matches:
            keep, beyond = self._cap(rows, keep, rough[keep], holds, pats, terms, domain_terms, max_matches)
        out = []
        held = np.ascontiguousarray(holds[:, keep].T)  # per kept entry, which patterns it holds
        made: dict[tuple[bytes, int], tuple[tuple[TermMatch, ...], float]] = {}
        for j, bits, code in zip(keep.tolist(), map(bytes, held), codes[keep].tolist(), strict=True):
            both = made.get((bits, code))
            if both is None:
                row_terms = [terms.of(pats[i].term) for i in np.flatnonzero(holds[:, j]).tolist()]
                term = domain_terms.get(code)
                if term is not None:
                    row_terms.append(term)
                ordered = tuple(sorted(row_terms, key=lambda t: (-t.weight, t.key, t.field)))
                both = made[(bits, code)] = (ordered, sum(t.weight for t in ordered))
            out.append((int(rows[j]), both))
        return out, beyond

    def _cap(
        self,
        rows: np.ndarray,
        keep: np.ndarray,
        scores: np.ndarray,
        holds: np.ndarray,
        pats: list[_Pattern],
        terms: QueryTerms,
        domain_terms: dict[int, TermMatch],
        max_matches: int,
    ) -> tuple[np.ndarray, Beyond]:
        """The best max_matches of the candidates `keep` (positions in `rows`, sorted), and the domains and terms
        of all of them."""
        ranks = self._id_rank[rows[keep]]
        if len(keep) <= FULL_SORT_UP_TO:
            order = np.lexsort((ranks, -scores))  # best first, then by entry id
            codes = self._raw_domain_of_row[rows[keep[order]]]
            _, at = np.unique(codes, return_index=True)
            domain_order = codes[np.sort(at)]
            best = np.sort(keep[order[:max_matches]])
        else:
            best, domain_order = self._best_unsorted(rows[keep], keep, scores, ranks, max_matches)
        domains = tuple(d for d in (self._raw_domains[c] for c in domain_order.tolist()) if d.strip())
        kept_terms = [terms.of(pats[i].term) for i in np.flatnonzero(holds[:, keep].any(axis=1)).tolist()]
        present = set(np.flatnonzero(np.bincount(self._domain_of_row[rows[keep]])).tolist())
        kept_terms += [t for code, t in domain_terms.items() if code in present]
        return best, Beyond(len(keep), domains, tuple(kept_terms))

    def _best_unsorted(
        self, kept_rows: np.ndarray, keep: np.ndarray, scores: np.ndarray, ranks: np.ndarray, max_matches: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """What `_cap` takes from a full sort, without one (thousands can pass the keep ratio at 100,000 entries):
        the best max_matches of `keep` (best first, then by entry id), and the raw domain codes in the order of
        each one's best entry."""
        # every candidate above the max_matches-th score, and of those tied with it the first by entry id
        kth = np.partition(scores, len(scores) - max_matches)[len(scores) - max_matches]
        above, tied = np.flatnonzero(scores > kth), np.flatnonzero(scores == kth)
        need = max_matches - len(above)
        if len(tied) > need:
            tied = tied[np.argpartition(ranks[tied], need - 1)[:need]]
        codes = self._raw_domain_of_row[kept_rows]
        top = np.full(len(self._raw_domains), -np.inf)  # each domain's best score
        np.maximum.at(top, codes, scores)
        at_top = scores == top[codes]
        first = np.full(len(self._raw_domains), np.iinfo(np.int64).max)  # and its first entry id with that score
        np.minimum.at(first, codes[at_top], ranks[at_top])
        present = np.flatnonzero(np.isfinite(top))
        return np.sort(keep[np.concatenate((above, tied))]), present[np.lexsort((first[present], -top[present]))]

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
