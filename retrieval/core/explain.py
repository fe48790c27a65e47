"""Why not this entry? One entry's trace through the lookup for one query, stage by stage: L0, the route, its rank
in each L1 list (with and without the filter), its parts in the fusion against the top, and the verdict (miss_cause).
It runs the one runner and records nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from retrieval.core.candidates import Candidate
from retrieval.core.chunking import heading_words
from retrieval.core.corpus import Entry, close_ids
from retrieval.core.fusion_parts import SignalPart
from retrieval.core.hints import TermMatch
from retrieval.core.l1_search import search_l1
from retrieval.core.lookup import search_text
from retrieval.core.miss_cause import Miss, MissCause, RunView, cause_of
from retrieval.core.pipeline import L1Query
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import PipelineRun, RunOptions, candidate_depth, lookup_pipeline, run_pipeline, weights_of
from retrieval.core.search_request import SearchRequest
from retrieval.core.text import STOPWORDS, content_spans
from retrieval.errors import EntryNotFound, L1Error
from retrieval.types.modes import SearchMode
from retrieval.types.options import LookupOptions

EXPLAIN_DEPTH = 1000  # how deep the trace's own lists look for the entry's rank among all entries
ALL = 1_000_000  # results kept of the lookup's ranking: all of them, so that any entry's fused rank is known
_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # Weaviate's `word` tokenization: runs of letters and digits, lower-cased


@dataclass(frozen=True)
class L0Stage:
    """What L0 made of the entry: its own terms the query matched, the query's words it lacks and its heaviest terms the
    query lacks, its L0 score and its rank among every entry L0 matched (None: not matched)."""

    matched: tuple[TermMatch, ...]
    query_lacks: tuple[str, ...]
    entry_lacks: tuple[str, ...]
    score: float | None
    rank: int | None
    matched_entries: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "matched": [t.to_dict() for t in self.matched],
            "query_words_the_entry_lacks": list(self.query_lacks),
            "entry_terms_the_query_lacks": list(self.entry_lacks),
            "score": None if self.score is None else round(self.score, 4),
            "rank": self.rank,
            "matched_entries": self.matched_entries,
        }


@dataclass(frozen=True)
class ListRank:
    """Where the entry stands in one L1 list searched `searched` deep: its rank (None: not in it) and score there; `full`
    False when the list came back shorter than asked (it holds every entry that search can find)."""

    rank: int | None
    score: float | None
    searched: int
    full: bool

    def describe(self) -> str:
        """Its place in words: its rank (and score), past the list's depth, or not a hit at all."""
        if self.rank is not None:
            return f"rank {self.rank} (score {self.score:.4f})" if self.score is not None else f"rank {self.rank}"
        return f"beyond {self.searched}" if self.full else "no hit"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": None if self.score is None else round(self.score, 5),
            "searched": self.searched,
            "full": self.full,
        }


@dataclass(frozen=True)
class SignalStage:
    """One L1 signal for the entry: its rank in the lookup's own list (cut at the candidate depth), among all entries
    unfiltered and under the route's filter, its best chunk (vector) or the query's words per field it holds (BM25F)."""

    signal: str
    in_lookup: int | None
    depth: int
    unfiltered: ListRank
    filtered: ListRank | None
    chunk_index: int | None = None
    snippet: str = ""
    similarity: float | None = None
    field_hits: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "in_lookup": self.in_lookup,
            "depth": self.depth,
            "unfiltered": self.unfiltered.to_dict(),
            "filtered": None if self.filtered is None else self.filtered.to_dict(),
        }
        if self.signal == "vector":
            out |= {"best_chunk": self.chunk_index, "snippet": self.snippet[:300], "similarity": _round(self.similarity)}
        else:
            out["field_hits"] = {f: list(words) for f, words in self.field_hits}
        return out


@dataclass(frozen=True)
class FusionStage:
    """The entry's fused score made of its parts against the top result's: each signal's scaled score times its weight
    (or the bound or 0 for being past a list's depth), the named-in-full bonus, the fused score and rank."""

    parts: tuple[SignalPart, ...]
    top: str | None
    top_parts: tuple[SignalPart, ...]
    score: float | None
    top_score: float | None
    rank: int | None
    ranked: int
    named: bool
    top_named: bool
    named_weight: float

    def gaps(self) -> dict[str, float]:
        """The top's part minus the entry's, signal by signal (positive: the top got more)."""
        out = {t.signal: t.value - m.value for m, t in zip(self.parts, self.top_parts, strict=True)}
        out["named"] = self.named_weight * (int(self.top_named) - int(self.named))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": [p.to_dict() for p in self.parts],
            "top": self.top,
            "top_parts": [p.to_dict() for p in self.top_parts],
            "score": _round(self.score),
            "top_score": _round(self.top_score),
            "rank": self.rank,
            "ranked": self.ranked,
            "named": self.named,
            "top_named": self.top_named,
            "gaps": {k: round(v, 5) for k, v in self.gaps().items()},
        }


@dataclass(frozen=True)
class EntryTrace:
    """One entry through the lookup for one query at given options, stage by stage, and its verdict."""

    query: str
    entry_id: str
    title: str
    domain: str
    top_k: int
    route: str | None  # the domain the filter chose (None: unfiltered)
    domains: tuple[str, ...]  # the L0 domains the route read
    l1_status: str
    l0: L0Stage
    vector: SignalStage | None
    bm25: SignalStage | None
    fusion: FusionStage
    miss: Miss | None
    verdict: str

    @property
    def rank(self) -> int | None:
        return self.fusion.rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "top_k": self.top_k,
            "verdict": self.verdict,
            "cause": None if self.miss is None else self.miss.to_dict(),
            "rank": self.rank,
            "l0": self.l0.to_dict(),
            "routing": {"filter": self.route, "l0_domains": list(self.domains), "entry_domain": self.domain},
            "l1_status": self.l1_status,
            "vector": None if self.vector is None else self.vector.to_dict(),
            "bm25": None if self.bm25 is None else self.bm25.to_dict(),
            "fusion": self.fusion.to_dict(),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 5)


def run_view(run: PipelineRun, options: LookupOptions) -> RunView:
    """What miss_cause reads of a run of the runner."""
    p = run.pipeline
    return RunView(run.hints, run.l1, run.results, p.l1, p.fusion, weights_of(options), p.limit)


def explain_entry(
    query: str, entry_id: str, services: LookupServices, options: LookupOptions, *, depth: int = EXPLAIN_DEPTH
) -> EntryTrace:
    """The trace of `entry_id` for `query` under `options` (the lookup's own run, every result kept, and the trace's
    deeper lists). Raises EntryNotFound for an id the knowledge base does not hold."""
    entries = services.l0.entries
    entry = entries.get(entry_id)
    if entry is None:
        raise EntryNotFound(entry_id, len(entries), close_ids(entry_id, entries))
    searched = search_text(query)
    run = run_pipeline(searched, lookup_pipeline(options), services, options, RunOptions(k=ALL))
    view = run_view(run, options)
    miss = cause_of(entry_id, view, entries)
    vector, bm25 = _signals(run, entry, services, options, depth)
    trace = EntryTrace(
        query=query,
        entry_id=entry_id,
        title=entry.title,
        domain=entry.domain,
        top_k=options.top_k,
        route=run.l1.category,
        domains=tuple(run.hints.domains),
        l1_status=str(run.l1.status),
        l0=_l0_stage(searched, entry, run, services),
        vector=vector,
        bm25=bm25,
        fusion=_fusion_stage(entry_id, run, view),
        miss=miss,
        verdict="",
    )
    return _with_verdict(trace, options)


def _l0_stage(searched: str, entry: Entry, run: PipelineRun, services: LookupServices) -> L0Stage:
    own = services.l0.index_terms(entry.entry_id)
    keys = [t.key for t in content_spans(searched).tokens]
    haystack = f" {' '.join(keys)} "
    matched_keys = {t["key"] for t in own if f" {t['key']} " in haystack}
    mine = next((m for m in run.hints.matches if m.entry_id == entry.entry_id), None)
    everything = run.hints
    if mine is None:  # past the keep ratio or the listed matches: every match, to find its place
        everything = services.l0.match(searched, keep_ratio=0.0, max_matches=max(services.l0.entry_count(), 1))
        mine = next((m for m in everything.matches if m.entry_id == entry.entry_id), None)
    rank = next((i + 1 for i, m in enumerate(everything.matches) if m.entry_id == entry.entry_id), None)
    entry_keys = {w for t in own for w in t["key"].split()}
    body = f" {' '.join(t.key for t in content_spans(f'{entry.title} {entry.text}').tokens)} "
    query_lacks = tuple(dict.fromkeys(k for k in keys if k not in entry_keys and f" {k} " not in body))
    entry_lacks = tuple(dict.fromkeys(t["term"] for t in own if t["key"] not in matched_keys))[:6]
    return L0Stage(
        matched=mine.terms if mine is not None else (),
        query_lacks=query_lacks[:8],
        entry_lacks=entry_lacks,
        score=mine.score if mine is not None else None,
        rank=rank,
        matched_entries=everything.match_count,
    )


def _signals(
    run: PipelineRun, entry: Entry, services: LookupServices, options: LookupOptions, depth: int
) -> tuple[SignalStage | None, SignalStage | None]:
    """The vector and BM25F stages, from the trace's lists `depth` deep (None each when L1 did not run)."""
    store = services.store
    if run.vector is None or store is None or not run.l1.status.ran:
        return None, None
    lookup_depth = candidate_depth(options)
    deep = max(min(depth, services.l0.entry_count()), lookup_depth)
    queries = (L1Query(SearchMode.NEAR_VECTOR, deep, grouped=True), L1Query(SearchMode.BM25, deep, with_vector=False))
    searched = run.searched

    def lists(category: str | None) -> tuple[tuple[Candidate, ...], ...] | None:
        try:
            return search_l1(
                store,
                queries,
                text=searched,
                vector=run.vector,
                category=category,
                timeout_s=options.l1_timeout_s,
                entries=services.l0.entry_count(category),
            )
        except L1Error:
            return None

    unfiltered = lists(None)
    filtered = lists(run.l1.category) if run.l1.category is not None else None
    if unfiltered is None:
        return None, None

    def place(found: tuple[Candidate, ...]) -> ListRank:
        i = next((i for i, c in enumerate(found) if c.entry_id == entry.entry_id), None)
        return ListRank(None if i is None else i + 1, None if i is None else found[i].score, deep, len(found) >= deep)

    def in_lookup(found: tuple[Candidate, ...]) -> int | None:
        return next((i + 1 for i, c in enumerate(found) if c.entry_id == entry.entry_id), None)

    best = next((c for c in unfiltered[0] if c.entry_id == entry.entry_id), None)
    similarity = best.similarity if best is not None else _card_similarity(run, entry.entry_id, services, options)
    vector = SignalStage(
        "vector",
        in_lookup(run.l1.candidates),
        lookup_depth,
        place(unfiltered[0]),
        None if filtered is None else place(filtered[0]),
        chunk_index=None if best is None else best.chunk_index,
        snippet="" if best is None else best.snippet,
        similarity=similarity,
    )
    bm25 = SignalStage(
        "bm25",
        in_lookup(run.l1.lexical) if run.l1.lexical else None,
        lookup_depth,
        place(unfiltered[1]),
        None if filtered is None else place(filtered[1]),
        field_hits=field_hits(searched, entry),
    )
    return vector, bm25


def _card_similarity(run: PipelineRun, entry_id: str, services: LookupServices, options: LookupOptions) -> float | None:
    """The query's similarity to the entry's card (chunk 0), for an entry past the trace's vector list."""
    if services.store is None:
        return None
    try:
        found = services.store.search(SearchRequest.cards(run.vector, [entry_id], timeout_s=options.l1_timeout_s))
    except L1Error:
        return None
    return found[0].similarity if found else None


def field_hits(searched: str, entry: Entry) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The query's words (Weaviate's word tokenization, stopwords left out) that each BM25F field of the entry holds."""
    words = [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(searched)) if w not in STOPWORDS]
    fields = {
        "heading": heading_words(entry),
        "keywords": " ".join(entry.keywords),
        "entities": " ".join(entry.entities),
        "body": entry.text,
    }
    out = []
    for name, text in fields.items():
        have = {w.lower() for w in _WORD.findall(text)}
        hits = tuple(w for w in words if w in have)
        if hits:
            out.append((name, hits))
    return tuple(out)


def _fusion_stage(entry_id: str, run: PipelineRun, view: RunView) -> FusionStage:
    inputs = view.inputs()
    rank = view.rank(entry_id)
    item = run.results[rank - 1] if rank else None
    top = run.results[0] if run.results else None
    return FusionStage(
        parts=inputs.parts(entry_id),
        top=None if top is None else top.entry_id,
        top_parts=inputs.parts(top.entry_id) if top is not None else inputs.parts(""),
        score=None if item is None else item.score,
        top_score=None if top is None else top.score,
        rank=rank,
        ranked=len(run.results),
        named=bool(item and item.named),
        top_named=bool(top and top.named),
        named_weight=view.weights.named,
    )


def _with_verdict(trace: EntryTrace, options: LookupOptions) -> EntryTrace:
    return replace(trace, verdict=verdict(trace, options))


def verdict(trace: EntryTrace, options: LookupOptions) -> str:
    """One sentence: the first stage that put the entry below the top, with the numbers."""
    rank, k = trace.rank, trace.top_k
    place = f"rank {rank}" if rank else "not ranked"
    shown = f"{place}, in the top {k}" if rank and rank <= k else f"{place}, outside the top {k}"
    miss = trace.miss
    if miss is None:
        return f"first: {trace.entry_id} is the top result"
    if miss.cause is MissCause.FILTER:
        v = trace.vector.unfiltered.rank if trace.vector else None
        unfiltered = f"; unfiltered, its vector rank would be {v}" if v else ""
        return f"{shown}: {miss.detail}{unfiltered}"
    if miss.cause is MissCause.PAST_DEPTH:
        ranks = []
        for stage, name in ((trace.vector, "vector"), (trace.bm25, "BM25F")):
            if stage is None:
                continue
            r = stage.filtered if stage.filtered is not None else stage.unfiltered
            if r.rank is not None:
                ranks.append(f"{name} rank {r.rank}")
            else:
                ranks.append(f"{name} beyond {r.searched}" if r.full else f"no {name} hit")
        depth = candidate_depth(options)
        return f"{shown}: past the lists' depth ({depth}): {', '.join(ranks) or 'L0 did not match it'}"
    return f"{shown}: {miss.detail}"
