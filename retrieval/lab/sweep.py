"""Settings sweeps: every grid point on every case of one or more eval sets, chosen by cross-validation.

Each case is embedded once and asks Weaviate once per distinct query setting (search mode, hybrid alpha,
candidate depth) of the grid and the current settings; every grid point then re-ranks those candidates with
the lookup's own `fuse` and `assess`, so a point that changes only weights or support thresholds costs no
query. The figures are those of `run_eval`'s `lookup` configuration at the same settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.core.candidates import Candidate, L1Status
from retrieval.core.hints import EntryMatch
from retrieval.core.lookup import LookupServices, search_text
from retrieval.core.pipeline import L1Query, judge, lookup_pipeline, rank, route, search_l1
from retrieval.core.search_request import SearchMode
from retrieval.errors import LookupLabError
from retrieval.evals.catalog import EvalSetFile, same_path
from retrieval.evals.evaluation import DEPTH
from retrieval.evals.sets import EvalSet, corpus_fit, load_eval_set
from retrieval.evals.tuning import SWEEPABLE, CrossValidation, Grid, check_cv, cross_validate, macro_mean, paired_test
from retrieval.store.models import DEFAULT_MODEL

Progress = Callable[[str, int, int], None]  # (stage, done, total)
QUERY_SETTINGS = ("search_mode", "hybrid_alpha", "top_k", "embedding_model")  # the rest only re-rank or re-assess
METRIC_NAMES = ("mrr@10", "hit@1", "recall@5", "correct_supported_rate", "unanswerable_unsupported_rate")


@dataclass(frozen=True)
class QueryKey:
    """One kind of Weaviate query: near_vector, bm25 or hybrid (with its alpha), to a candidate depth, in the
    collection of one embedding model (whose vector the query carries)."""

    kind: SearchMode
    depth: int
    alpha: float | None = None
    model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", SearchMode(self.kind))

    def query(self, settings: Settings) -> L1Query:
        """The retriever of this key: the query fetches similarities whatever its kind (for the support estimate)."""
        return L1Query(self.kind, self.depth, settings.hybrid_alpha if self.alpha is None else self.alpha)


def query_keys(settings: Settings) -> tuple[QueryKey, ...]:
    """The queries a lookup at these settings makes, as run_eval runs it (its top-k at least DEPTH)."""
    pipeline = lookup_pipeline(settings.with_(top_k=max(DEPTH, settings.top_k)))
    model = settings.embedding_model
    return tuple(QueryKey(q.mode, q.depth, q.alpha if q.mode is SearchMode.HYBRID else None, model) for q in pipeline.queries)


def point_settings(current: Settings, point: Mapping[str, Any]) -> Settings:
    return current.with_(**point)


@dataclass(frozen=True)
class CaseSignals:
    """What the lookup's fusion sees for one case, per query setting: L0 matches and the L1 candidates."""

    set_name: str
    case_id: str
    relevant: frozenset[str]  # expected entries with a grade > 0; empty: unanswerable
    l0: tuple[EntryMatch, ...]
    found: Mapping[QueryKey, tuple[Candidate, ...]]
    query: str = ""  # what was searched (search_text of the case's query)


def collect_signals(
    eval_set: EvalSet,
    services: LookupServices,
    settings: Settings,
    keys: Sequence[QueryKey],
    *,
    progress: Progress | None = None,
    other_models: Mapping[str, LookupServices] | None = None,
) -> list[CaseSignals]:
    """Every case's L0 matches and its candidates for each of `keys`, under the lookup's routing. `services`
    search with the settings' embedding model; keys of another model use `other_models[model]` (its embedder and
    its collection)."""
    by_model = {settings.embedding_model: services, **(other_models or {})}
    ready = {}  # model -> (embedder, store)
    for model in dict.fromkeys(k.model for k in keys):
        use = by_model.get(model)
        if use is None:
            raise LookupLabError(f"the sweep varies embedding_model over {model}, but no collection of that model was given")
        if use.store is None or use.embedder is None or not settings.l1_enabled:
            raise LookupLabError(f"a sweep needs L1, which is unavailable: {use.l1_unavailable or 'L1 is off or not connected'}")
        use.embedder.prime([search_text(c.query) for c in eval_set.cases])
        ready[model] = (use.embedder, use.store)
    out, total = [], len(eval_set.cases) * len(keys)
    routed = lookup_pipeline(settings)  # the lookup's routing: L1 filtered on the L0 domain when there is one
    for i, case in enumerate(eval_set.cases):
        query = search_text(case.query)
        hints = services.l0.match(query)
        category = route(hints, routed)
        found = {}
        for j, key in enumerate(keys):
            embedder, store = ready[key.model]
            vector = embedder.embed_query(query)
            (found[key],) = search_l1(
                store, (key.query(settings),), text=query, vector=vector, category=category, timeout_s=settings.l1_timeout_s
            )
            if progress:
                progress(f"Weaviate queries ({eval_set.name})", i * len(keys) + j + 1, total)
        relevant = frozenset(e for e, g in case.expected.items() if g > 0)
        out.append(CaseSignals(eval_set.name, case.id, relevant, hints.matches, found, query))
    return out


def case_figures(s: CaseSignals, settings: Settings) -> tuple[float, float, float, bool, bool]:
    """(reciprocal rank in the top 10, hit@1, recall@5, semantic support claimed, top result right) of one
    case at these settings, as lookup_knowledge would rank and assess it."""
    keys = query_keys(settings)
    vector = s.found[keys[0]]
    lexical = s.found[keys[1]] if len(keys) > 1 else ()
    ranking = rank(s.l0, vector, lexical, settings, k=max(DEPTH, settings.top_k))
    relevance = judge(ranking, L1Status.OK if vector or lexical else L1Status.EMPTY, vector, lexical, s.query, settings)
    ids = [r.entry_id for r in ranking]
    place = next((i for i, e in enumerate(ids[:DEPTH], 1) if e in s.relevant), None)
    recall = len(s.relevant & set(ids[:5])) / len(s.relevant) if s.relevant else 0.0
    top_right = bool(ids) and ids[0] in s.relevant
    return (0.0 if place is None else 1.0 / place), float(place == 1), recall, relevance.semantic_support, top_right


@dataclass(frozen=True)
class PointResult:
    """One grid point (or the current settings): the swept values, macro metrics over the sets, mrr@10 per set."""

    settings: dict[str, Any]
    metrics: dict[str, float | None]
    per_set: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, **self.metrics, "per_set": self.per_set}


def _macro(values: np.ndarray, sets: np.ndarray, mask: np.ndarray) -> float | None:
    rows = np.flatnonzero(mask)
    return macro_mean(values, sets, rows) if len(rows) else None


def _score(signals: Sequence[CaseSignals], settings: Settings, shown: dict[str, Any]) -> tuple[PointResult, np.ndarray]:
    figures = np.array([case_figures(s, settings) for s in signals], dtype=float).reshape(len(signals), 5)
    sets = np.array([s.set_name for s in signals])
    answerable = np.array([bool(s.relevant) for s in signals])
    rr, hit1, recall5, supported, right = figures.T
    metrics = {
        "mrr@10": _macro(rr, sets, answerable),
        "hit@1": _macro(hit1, sets, answerable),
        "recall@5": _macro(recall5, sets, answerable),
        "correct_supported_rate": _macro(supported * right, sets, answerable),
        "unanswerable_unsupported_rate": _macro(1.0 - supported, sets, ~answerable),
    }
    per_set = {str(g): float(rr[answerable & (sets == g)].mean()) for g in np.unique(sets[answerable])}
    return PointResult(shown, metrics, per_set), rr


@dataclass(frozen=True)
class BestPoint:
    """The point with the best in-sample macro mrr@10, the cross-validated estimate of choosing that way,
    and the paired test of its reciprocal ranks against the current settings' on the answerable cases."""

    index: int
    point: PointResult
    cv: CrossValidation
    chosen: tuple[tuple[dict[str, Any], int], ...]
    vs_current: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.point.settings,
            "cv_mean": self.cv.cv_mean,
            "cv_sd": self.cv.cv_sd,
            "in_sample": self.point.metrics["mrr@10"],
            "metrics": self.point.metrics,
            "p_value": self.vs_current["p_value"],
            "vs_current": self.vs_current,
            "cv": self.cv.to_dict(),
            "chosen": [{"settings": s, "times": n} for s, n in self.chosen],
        }


@dataclass(frozen=True)
class SweepResult:
    grid: Grid
    sets: dict[str, dict[str, int]]
    fixed: dict[str, Any]  # the sweepable settings the grid does not vary, at their current values
    points: tuple[PointResult, ...]
    best: BestPoint
    current: PointResult
    queries: int  # distinct Weaviate query settings asked per case

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": self.grid.to_dict(),
            "sets": self.sets,
            "fixed": self.fixed,
            "queries_per_case": self.queries,
            "points": [p.to_dict() for p in self.points],
            "best": self.best.to_dict(),
            "current": self.current.to_dict(),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per point: the swept settings, then the metrics (for tables and charts)."""
        return [{**p.settings, **p.metrics} for p in self.points]


def keys_for(grid: Grid, current: Settings) -> tuple[QueryKey, ...]:
    """Every distinct query of the grid's points and of the current settings, each once."""
    wanted = [current, *(point_settings(current, p) for p in grid.points())]
    return tuple(dict.fromkeys(k for s in wanted for k in query_keys(s)))


def run_sweep(
    signals: Sequence[CaseSignals],
    grid: Grid,
    current: Settings,
    *,
    folds: int = 5,
    repeats: int = 5,
    seed: int = 7,
    progress: Progress | None = None,
) -> SweepResult:
    """Score every point on the collected signals, cross-validate the choice, compare with the current settings."""
    points, scores, todo = [], [], grid.points()
    for i, p in enumerate(todo):
        result, rr = _score(signals, point_settings(current, p), dict(p))
        points.append(result)
        scores.append(rr)
        if progress:
            progress("grid points", i + 1, len(todo))
    now, now_rr = _score(signals, current, {name: getattr(current, name) for name in grid.names})
    answerable = np.array([bool(s.relevant) for s in signals])
    sets = np.array([s.set_name for s in signals])
    # a tie goes to the point that changes the fewest current settings (a setting that does not matter is left as it
    # is, and the support thresholds, which do not move mrr@10, stay unless the sweep changes nothing else)
    closeness = [-sum(v != getattr(current, k) for k, v in p.settings.items()) for p in points]
    matrix = np.vstack(scores)[:, answerable]
    cv = cross_validate(matrix, sets[answerable], folds=folds, repeats=repeats, seed=seed, tiebreak=closeness)
    best = max(range(len(points)), key=lambda i: (points[i].metrics["mrr@10"] or 0.0, closeness[i]))
    test = paired_test(now_rr[answerable], scores[best][answerable]).to_dict()
    chosen = tuple((points[i].settings, n) for i, n in cv.chosen())
    return SweepResult(
        grid=grid,
        sets={
            str(g): {"cases": int((sets == g).sum()), "answerable": int((answerable & (sets == g)).sum())}
            for g in np.unique(sets)
        },
        fixed={name: getattr(current, name) for name in SWEEPABLE if name not in grid.names},
        points=tuple(points),
        best=BestPoint(best, points[best], cv, chosen, test),
        current=now,
        queries=len(keys_for(grid, current)),
    )


def check_folds(eval_sets: Sequence[EvalSet], folds: int, repeats: int) -> None:
    """Refuse, before any query, folds and repeats the sets cannot give."""
    check_cv({e.name: sum(c.answerable for c in e.cases) for e in eval_sets}, folds, repeats)


def sweep_sets(
    eval_sets: Sequence[EvalSet],
    services: LookupServices,
    current: Settings,
    grid: Grid,
    *,
    folds: int = 5,
    repeats: int = 5,
    progress: Progress | None = None,
    other_models: Mapping[str, LookupServices] | None = None,
) -> SweepResult:
    """Sets on one loaded corpus (the app's case): collect the signals, then sweep. `other_models`: the services
    (embedder and collection) of each other embedding model the grid varies."""
    check_folds(eval_sets, folds, repeats)
    keys = keys_for(grid, current)
    signals = [
        s for e in eval_sets for s in collect_signals(e, services, current, keys, progress=progress, other_models=other_models)
    ]
    return run_sweep(signals, grid, current, folds=folds, repeats=repeats, progress=progress)


def fitting_eval_sets(files: Sequence[EvalSetFile], known_ids: Sequence[str], corpus_dir: Path | str) -> list[EvalSetFile]:
    """The eval set files a sweep can run on the loaded corpus: every entry they expect is in it, and they
    have a case with a right answer or were written for this corpus."""
    out = []
    for f in files:
        try:
            eval_set = load_eval_set(f.path)
        except LookupLabError:
            continue
        answerable = any(c.answerable for c in eval_set.cases)
        if corpus_fit(eval_set, known_ids).fits and (answerable or same_path(eval_set.corpus_dir, corpus_dir)):
            out.append(f)
    return out
