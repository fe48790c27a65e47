"""L0's terms: the match keys of an entry's title, file name, keywords, entities and domain, and how a query
writes the keys it matched."""

from __future__ import annotations

from collections.abc import Iterable

from retrieval.core.corpus import Entry
from retrieval.core.hints_result import TermMatch
from retrieval.core.text import Spans, content_spans, content_tokens

MAX_NGRAM = 3


def _ngrams(text: str, *, whole_words: bool) -> Iterable[tuple[str, str]]:
    """(match key, text as written) of every n-gram of the content tokens of `text`, n up to MAX_NGRAM. The
    text as written is the span of the n-gram's words (whole_words), or of its CamelCase parts (a file name)."""
    spans = content_spans(text)
    words = [t.key for t in spans.tokens]
    for n in range(1, MAX_NGRAM + 1):
        for i in range(len(words) - n + 1):
            yield " ".join(words[i : i + n]), spans.surface(i, i + n - 1, whole_words=whole_words)


def match_key(text: str) -> str:
    """The match key of a phrase: its content tokens, as the query is reduced to them too."""
    return " ".join(content_tokens(text))


def named_keys(entry: Entry) -> tuple[str, ...]:
    """The match keys that name `entry` in full: its whole title and its whole file name, each of at least
    two content tokens (a one-word title such as "Overview" names nothing)."""
    keys = dict.fromkeys(k for k in (match_key(entry.title), match_key(entry.name)) if len(k.split()) >= 2)
    return tuple(keys)


def entry_terms(entry: Entry) -> Iterable[tuple[str, str, str]]:
    """(match key, field, display text as written in the entry) for one entry."""
    for gram, written in _ngrams(entry.title, whole_words=True):
        yield gram, "title", written
    if match_key(entry.name) != match_key(entry.title):
        for gram, written in _ngrams(entry.name, whole_words=False):
            if len(gram.split()) > 1:
                yield gram, "name", written
        yield match_key(entry.name), "name", entry.name
    for kw in entry.keywords:
        yield match_key(kw), "keyword", kw
    for ent in entry.entities:
        yield match_key(ent), "entity", ent
    yield match_key(entry.domain), "domain", entry.domain


def as_written(words: list[str], keys: list[str], spans: Spans) -> str:
    """The query's text from the first place its content tokens `keys` hold the sequence `words`, as the query
    writes it (CamelCase parts, not whole words: "etcd" of "etcdMembersDown")."""
    n = len(words)
    for i in range(len(keys) - n + 1):
        if keys[i : i + n] == words:
            return spans.surface(i, i + n - 1, whole_words=False)
    return " ".join(words)  # not reached: the automaton found the key in these tokens


class QueryTerms:
    """Each matched pattern's TermMatch for one query (the query's words; the field, weight and key of the
    pattern's own TermMatch, which `of` is given),
    made when first asked for: how the query writes a key is looked up for the terms shown only."""

    def __init__(self, keys: list[str], spans: Spans) -> None:
        self.keys = keys
        self.spans = spans
        self._written: dict[str, str] = {}
        self._made: dict[int, TermMatch] = {}

    def of(self, p: TermMatch) -> TermMatch:
        term = self._made.get(id(p))
        if term is None:
            key = p.key
            written = self._written.get(key)
            if written is None:
                written = self._written[key] = as_written(key.split(), self.keys, self.spans)
            term = self._made[id(p)] = TermMatch(written, p.field, p.weight, key)
        return term
