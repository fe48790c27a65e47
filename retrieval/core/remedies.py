"""What it would take: the smallest change among the settings a sweep varies (the filter off, the search mode, each
fusion weight, the candidate depth, the embedding model) that puts an entry first, and the one that puts it into the
top k. Each change is run through the one runner, never predicted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.core.corpus import close_ids
from retrieval.core.lookup import search_text
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import RunOptions, candidate_depth, lookup_pipeline, run_pipeline
from retrieval.errors import EntryNotFound
from retrieval.types.modes import LookupMode
from retrieval.types.options import LookupOptions

# The values each numeric setting is tried at (those of the current settings' are skipped), as the sweep grids name them.
WEIGHT_VALUES = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0)
DEPTH_VALUES = (10, 15, 30, 50, 100)
WEIGHTS = {
    "vector_weight": "vector weight",
    "lexical_weight": "BM25F weight",
    "l0_weight": "L0 weight",
    "name_weight": "named-in-full weight",
}
FILTER_OFF = "filter"


@dataclass(frozen=True)
class Change:
    """One change of one setting: `size` orders changes (a switch counts 1; a number its change over its current value,
    at least 0.25 of one, so that from 0 to a little is small)."""

    setting: str
    value: Any
    label: str
    size: float

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "label": self.label, "size": round(self.size, 4)}


@dataclass(frozen=True)
class Tried:
    """One change as it ran: the entry's rank under it (None: not in the ranking kept)."""

    change: Change
    rank: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.change.to_dict(), "rank": self.rank}


@dataclass(frozen=True)
class Remedies:
    """The entry's rank now, the smallest change that puts it first and, when it is outside the top k, the smallest
    that puts it into the top k (None: none of these does, or it is in the top k already), and every change tried."""

    entry_id: str
    rank: int | None
    top_k: int
    first: Tried | None
    into_top_k: Tried | None
    tried: tuple[Tried, ...]

    def summary(self) -> str:
        def say(t: Tried | None, goal: str) -> str:
            return f"{goal}: none of these" if t is None else f"{goal}: {t.change.label} (rank {t.rank})"

        if self.rank == 1:
            return "first already: no change needed"
        parts = [say(self.first, "first")]
        if self.rank is None or self.rank > self.top_k:
            parts.append(say(self.into_top_k, f"into the top {self.top_k}"))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "rank": self.rank,
            "top_k": self.top_k,
            "first": None if self.first is None else self.first.to_dict(),
            "into_top_k": None if self.into_top_k is None else self.into_top_k.to_dict(),
            "tried": [t.to_dict() for t in self.tried],
            "summary": self.summary(),
        }


def _relative(new: float, old: float) -> float:
    return abs(new - old) / max(abs(old), 0.25)


def changes(options: LookupOptions, models: Mapping[str, Any] = {}) -> list[Change]:
    """Every single-setting change tried, smallest first."""
    out = [Change(FILTER_OFF, False, "the L0 filter off", 1.0)]
    out += [
        Change("search_mode", str(m), f"search mode {options.search_mode} → {m}", 1.0)
        for m in LookupMode
        if m != LookupMode(options.search_mode)
    ]
    for field, label in WEIGHTS.items():
        now = float(getattr(options, field))
        out += [Change(field, v, f"{label} {now:g} → {v:g}", _relative(v, now)) for v in WEIGHT_VALUES if v != now]
    depth = candidate_depth(options)
    out += [
        Change("candidate_depth", d, f"candidate depth {depth} → {d}", _relative(d, depth))
        for d in DEPTH_VALUES
        if d != depth and d >= options.top_k
    ]
    out += [Change("embedding_model", m, f"embedding model {options.embedding_model} → {m}", 2.0) for m in models]
    return sorted(out, key=lambda c: (c.size, c.setting, str(c.value)))


def rank_under(
    change: Change | None, searched: str, entry_id: str, services: LookupServices, options: LookupOptions, k: int
) -> int | None:
    """The entry's rank in the lookup under one change (None: the current settings), `k` results kept."""
    run_as = RunOptions(k=k)
    if change is not None and change.setting == FILTER_OFF:
        run_as = RunOptions(category=None, k=k)
    elif change is not None and change.setting != "embedding_model":
        options = options.with_(**{change.setting: change.value})
    pipeline = lookup_pipeline(options)
    run = run_pipeline(searched, pipeline, services, options, run_as)
    return next((i + 1 for i, r in enumerate(run.results) if r.entry_id == entry_id), None)


def what_it_would_take(
    query: str,
    entry_id: str,
    services: LookupServices,
    options: LookupOptions,
    *,
    models: Mapping[str, Callable[[], LookupServices]] = {},
    keep: int = 50,
) -> Remedies:
    """Run the lookup under each change (`models`: other embedding models whose collections hold this knowledge base,
    each as the services that search it, opened when tried) and keep the smallest that puts `entry_id` first, and
    the smallest that puts it into the top k. Raises EntryNotFound for an id the knowledge base does not hold."""
    if entry_id not in services.l0.entries:
        raise EntryNotFound(entry_id, len(services.l0.entries), close_ids(entry_id, services.l0.entries))
    searched, k = search_text(query), max(keep, options.top_k)
    rank = rank_under(None, searched, entry_id, services, options, k)
    if rank == 1:
        return Remedies(entry_id, rank, options.top_k, None, None, ())  # nothing to bring back
    outside = rank is None or rank > options.top_k  # only then is there a change into the top k to find
    tried: list[Tried] = []
    first = into = None
    for change in changes(options, models):
        if first is not None:
            break  # every later change is larger; the smallest into the top k is found by then too (first is in it)
        if change.setting == "embedding_model":
            other = models[change.value]()
            got = rank_under(None, searched, entry_id, other, options.with_(embedding_model=change.value), k)
        else:
            got = rank_under(change, searched, entry_id, services, options, k)
        t = Tried(change, got)
        tried.append(t)
        if got == 1 and first is None:
            first = t
        if outside and got is not None and got <= options.top_k and into is None:
            into = t
    return Remedies(entry_id, rank, options.top_k, first, into, tuple(tried))


__all__ = ["Change", "Remedies", "Tried", "changes", "rank_under", "what_it_would_take"]
