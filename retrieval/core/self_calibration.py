"""The label-free support calibration of one knowledge base: its own entries as probe queries, each run twice.
With its entry among the candidates a probe is answerable; with it removed, its top is a sibling, where no support claim
must be made. The removed runs give the knowledge base's SupportNorms.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.core.candidates import Candidate, without
from retrieval.core.corpus import Entry
from retrieval.core.l1_search import search_l1
from retrieval.core.lookup import search_text
from retrieval.core.pipeline import Pipeline
from retrieval.core.probes import MAX_ENTRIES, Probe, draw_probes
from retrieval.core.protocols import LookupServices
from retrieval.core.ranking import CardQuery, ResultItem, with_card_similarities
from retrieval.core.runner import lookup_pipeline, rank_and_assess, route
from retrieval.core.support import SupportFeatures, SupportModel
from retrieval.core.support_norms import MIN_PAIRS, NORM_FEATURES, SupportNorms, fit_norms
from retrieval.errors import L1Error, LookupLabError
from retrieval.types.modes import L1Status
from retrieval.types.options import LookupOptions

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ProbeRun:
    """One run of a probe: with its entry among the candidates (`answerable`) or removed; its top result's features."""

    probe: Probe
    answerable: bool
    top_id: str
    named: bool
    features: SupportFeatures

    @property
    def right(self) -> bool:
        return self.answerable and self.top_id == self.probe.entry_id


@dataclass(frozen=True)
class ProbePair:
    """A probe's two runs (None where the ranking was empty) and the L1 query pairs they took (2 when the removed
    entry's L0 match had decided the routing)."""

    with_entry: ProbeRun | None
    without_entry: ProbeRun | None
    searches: int


@dataclass(frozen=True)
class SelfCalibration:
    """The probe runs of one knowledge base, the baselines fitted on them (None: too few runs), and the cost."""

    runs: tuple[ProbeRun, ...]
    norms: SupportNorms | None
    seconds: float
    searches: int  # L1 query pairs made
    probes: int
    notes: tuple[str, ...] = field(default=())

    def figures(self, model: SupportModel | None = None, threshold: float | None = None) -> dict[str, Any]:
        """Per probe style: its runs with and without the entry, how often the entry came first, and (given the
        support model) the share of answerable runs supported and of removed runs left unsupported."""
        out: dict[str, Any] = {}
        for style in sorted({r.probe.style for r in self.runs}):
            mine = [r for r in self.runs if r.probe.style == style]
            answerable = [r for r in mine if r.answerable]
            removed = [r for r in mine if not r.answerable]
            row: dict[str, Any] = {
                "probes": len(answerable),
                "entry_first": _share(r.right for r in answerable),
                "mean_similarity_with": _mean(r.features.similarity for r in answerable),
                "mean_similarity_removed": _mean(r.features.similarity for r in removed),
            }
            if model is not None and self.norms is not None:
                row["right_supported"] = _share(_claimed(r, model, self.norms, threshold) for r in answerable if r.right)
                row["removed_unsupported"] = _share(not _claimed(r, model, self.norms, threshold) for r in removed)
            out[style] = row
        return out

    def to_dict(self, model: SupportModel | None = None, threshold: float | None = None) -> dict[str, Any]:
        return {
            "norms": None if self.norms is None else self.norms.to_dict(),
            "fit": None if self.norms is None else self.norms.describe(),
            "seconds": round(self.seconds, 2),
            "searches": self.searches,
            "probes": self.probes,
            "styles": self.figures(model, threshold),
            "notes": list(self.notes),
        }


def _claimed(run: ProbeRun, model: SupportModel, norms: SupportNorms, threshold: float | None) -> bool:
    return run.named or model.probability(run.features, norms) >= model.cut(threshold)


def _share(flags: Any) -> float | None:
    values = list(flags)
    return None if not values else sum(map(bool, values)) / len(values)


def _mean(values: Any) -> float | None:
    got = list(values)
    return None if not got else round(sum(got) / len(got), 4)


def _deeper(pipeline: Pipeline) -> Pipeline:
    """The pipeline with every query one candidate deeper: a list without the removed entry is still full."""
    return replace(pipeline, queries=tuple(replace(q, depth=q.depth + 1) for q in pipeline.queries))


def run_probe(probe: Probe, services: LookupServices, options: LookupOptions, pipeline: Pipeline) -> ProbePair:
    """The probe with its entry, and with its entry removed, as the lookup would run them. A run whose ranking is
    empty is None. Raises L1Error when L1 cannot answer."""
    if services.store is None or services.embedder is None:
        raise L1Error(services.l1_unavailable or "L1 is not connected", unavailable=True)
    store = services.store
    text = search_text(probe.text)
    vector = services.embedder.embed_query(text)
    deep = _deeper(pipeline)
    depth = pipeline.queries[0].depth
    fetched: dict[str | None, tuple[tuple[Candidate, ...], ...]] = {}
    out: list[ProbeRun | None] = []
    for answerable in (True, False):
        drop = None if answerable else probe.entry_id
        hints = services.l0.match(text, exclude=drop)
        category = route(hints, pipeline)
        if category not in fetched:
            fetched[category] = search_l1(
                store,
                deep.queries,
                text=text,
                vector=vector,
                category=category,
                timeout_s=options.l1_timeout_s,
                entries=services.l0.entry_count(category),
            )
        lists = without(fetched[category], () if drop is None else (drop,), depth)
        status = L1Status.OK if any(lists) else L1Status.EMPTY

        def fill(results: Sequence[ResultItem]) -> tuple[ResultItem, ...]:
            return with_card_similarities(results, CardQuery(store, vector, options.l1_timeout_s))

        ranking, relevance = rank_and_assess(
            hints.matches, lists, pipeline, options, text, status, k=max(options.top_k, 2), fill=fill
        )
        if not ranking or relevance.features is None:
            out.append(None)
            continue
        out.append(ProbeRun(probe, answerable, ranking[0].entry_id, ranking[0].named, relevance.features))
    return ProbePair(out[0], out[1], len(fetched))


def self_calibrate(
    entries: Sequence[Entry],
    services: LookupServices,
    options: LookupOptions,
    *,
    progress: Progress | None = None,
    max_entries: int = MAX_ENTRIES,
    keep_title: bool = False,
    fitted_on: str = "",
) -> SelfCalibration:
    """Probe the knowledge base (every entry, or `max_entries` of a larger one) and fit its support baselines on the
    runs with the entry removed. Raises LookupLabError when L1 cannot answer."""
    started = time.perf_counter()
    probes = draw_probes(entries, max_entries=max_entries, keep_title=keep_title)
    pipeline = lookup_pipeline(options)
    if not pipeline.fusion or not pipeline.queries:
        raise LookupLabError(f"the support calibration runs the lookup's fusion; search_mode {options.search_mode} has none")
    if services.embedder is not None and hasattr(services.embedder, "prime"):
        services.embedder.prime([search_text(p.text) for p in probes])
    runs: list[ProbeRun] = []
    searches = 0
    for i, probe in enumerate(probes):
        try:
            pair = run_probe(probe, services, options, pipeline)
        except L1Error as exc:
            raise LookupLabError(f"the support calibration needs L1: {exc}") from exc
        runs.extend(r for r in (pair.with_entry, pair.without_entry) if r is not None)
        searches += pair.searches
        if progress:
            progress("support calibration", i + 1, len(probes))
    removed = [r for r in runs if not r.answerable and not r.named]
    notes = []
    norms = None
    if len(removed) >= MIN_PAIRS:
        rows = [(r.features.query_length, {f: getattr(r.features, f) for f in NORM_FEATURES}) for r in removed]
        norms = fit_norms(rows, fitted_on=fitted_on or f"{len(entries)} entries, {len(probes)} probes")
    else:
        notes.append(
            f"only {len(removed)} probe runs without their entry (at least {MIN_PAIRS} are needed): the reference baselines stay"
        )
    styles = Counter(p.style for p in probes)
    notes.append("probes per style: " + ", ".join(f"{s} {n}" for s, n in sorted(styles.items())))
    return SelfCalibration(tuple(runs), norms, time.perf_counter() - started, searches, len(probes), tuple(notes))
