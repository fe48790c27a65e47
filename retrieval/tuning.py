"""Choosing fusion weights without fooling ourselves: k-fold cross-validation over one or more eval sets.

Each case's signals (L0 hints, the vector and BM25F candidates under the lookup's routing) are fetched from
Weaviate once; every grid point then re-ranks them with the lookup's own `fuse`, so a point costs no query.
The selection is made on the training folds (macro mean of mrr@10 over the sets) and scored on the held-out
fold; folds are stratified by set, repeated with different shuffles.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import Settings
from .errors import EvalSetError
from .eval_sets import EvalSet
from .hints import EntryMatch
from .lookup import LookupServices, candidate_depth, clean_query
from .ranking import FusionWeights, fuse
from .routing import category_filter
from .weaviate_store import Candidate

TUNABLE = ("vector_weight", "lexical_weight", "l0_weight")
DEPTH = 10


@dataclass(frozen=True)
class CaseSignals:
    """What the lookup's fusion sees for one answerable case."""

    set_name: str
    case_id: str
    expected: frozenset[str]
    l0: tuple[EntryMatch, ...]
    vector: tuple[Candidate, ...]
    lexical: tuple[Candidate, ...]


def parse_grid(text: str) -> list[dict[str, float]]:
    """'vector_weight=0.5,1;l0_weight=0,0.1' -> every combination, as settings overrides."""
    axes: dict[str, list[float]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, values = part.partition("=")
        name = name.strip()
        if name not in TUNABLE:
            raise EvalSetError(f"--grid: '{name}' cannot be tuned here (tunable: {', '.join(TUNABLE)})")
        try:
            axes[name] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError as exc:
            raise EvalSetError(f"--grid: {name} needs numbers, got '{values}'") from exc
        if not axes[name] or any(v < 0 for v in axes[name]):
            raise EvalSetError(f"--grid: {name} needs one or more numbers >= 0, got '{values}'")
    if not axes:
        raise EvalSetError("--grid is empty: give e.g. 'vector_weight=0.5,1,1.5;l0_weight=0,0.1'")
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def collect_signals(eval_set: EvalSet, services: LookupServices, settings: Settings) -> list[CaseSignals]:
    """The fusion inputs of every answerable case, under the lookup's routing, from one query each."""
    if services.store is None or services.embedder is None:
        raise EvalSetError(f"tuning needs L1, which is unavailable: {services.l1_unavailable or 'not connected'}")
    depth = candidate_depth(max(DEPTH, settings.top_k))
    out = []
    services.embedder.prime([c.query for c in eval_set.cases])
    for case in eval_set.cases:
        if not case.answerable:
            continue
        query = clean_query(case.query)
        hints = services.l0.match(query)
        category = category_filter(hints.domains)
        vector = services.embedder.embed_query(query)
        found = services.store.search(vector, k=depth, category=category, query_text=query)
        lexical = services.store.search(vector, k=depth, category=category, mode="bm25", query_text=query)
        out.append(
            CaseSignals(
                eval_set.name,
                case.id,
                frozenset(e for e, g in case.expected.items() if g > 0),
                hints.matches,
                tuple(found),
                tuple(lexical),
            )
        )
    return out


def reciprocal_ranks(signals: Sequence[CaseSignals], point: dict[str, float], base: Settings) -> np.ndarray:
    """mrr@10 contribution of every case under one grid point."""
    values = {name: point.get(name, getattr(base, name)) for name in TUNABLE}
    weights = FusionWeights(vector=values["vector_weight"], lexical=values["lexical_weight"], l0=values["l0_weight"])
    out = np.zeros(len(signals))
    for i, s in enumerate(signals):
        ranking = fuse(s.l0, s.vector, s.lexical, k=DEPTH, weights=weights)
        out[i] = next((1.0 / r for r, item in enumerate(ranking, 1) if item.entry_id in s.expected), 0.0)
    return out


def _macro(rr: np.ndarray, sets: np.ndarray, rows: np.ndarray) -> float:
    return float(np.mean([rr[rows][sets[rows] == name].mean() for name in np.unique(sets[rows])]))


def cross_validate(
    signals: Sequence[CaseSignals],
    grid: Sequence[dict[str, float]],
    base: Settings,
    *,
    folds: int = 5,
    repeats: int = 5,
    seed: int = 7,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every grid point on every case; per repeat and fold, the point with the best training macro mrr@10
    and its held-out score. Returns the points, the in-sample best, and the CV figures."""
    if folds < 2:
        raise EvalSetError(f"--folds {folds}: cross-validation needs at least 2 folds")
    sets = np.array([s.set_name for s in signals])
    smallest = min(int((sets == name).sum()) for name in np.unique(sets))
    if smallest < folds:
        raise EvalSetError(f"--folds {folds}: a set has only {smallest} answerable cases")
    scores = np.vstack(
        [(progress(i, len(grid)) if progress else None, reciprocal_ranks(signals, p, base))[1] for i, p in enumerate(grid)]
    )
    everything = np.arange(len(signals))
    points = [
        {
            "settings": p,
            "mrr@10": _macro(scores[i], sets, everything),
            "per_set": {name: float(scores[i][sets == name].mean()) for name in np.unique(sets)},
        }
        for i, p in enumerate(grid)
    ]
    best = max(range(len(grid)), key=lambda i: points[i]["mrr@10"])
    rng = random.Random(seed)
    held, trained, picks = [], [], []
    for _ in range(repeats):
        fold_of = np.zeros(len(signals), dtype=int)
        for name in np.unique(sets):
            rows = list(np.flatnonzero(sets == name))
            rng.shuffle(rows)
            for j, r in enumerate(rows):
                fold_of[r] = j % folds
        for f in range(folds):
            train, test = np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)
            chosen = max(range(len(grid)), key=lambda i: _macro(scores[i], sets, train))
            picks.append(chosen)
            trained.append(_macro(scores[chosen], sets, train))
            held.append(_macro(scores[chosen], sets, test))
    counts = {i: picks.count(i) for i in set(picks)}
    return {
        "points": points,
        "best": {"settings": grid[best], "in_sample": points[best]["mrr@10"], "per_set": points[best]["per_set"]},
        "cv": {
            "folds": folds,
            "repeats": repeats,
            "in_sample_mean": float(np.mean(trained)),
            "in_sample_sd": float(np.std(trained)),
            "held_out_mean": float(np.mean(held)),
            "held_out_sd": float(np.std(held)),
            "chosen": [{"settings": grid[i], "times": n} for i, n in sorted(counts.items(), key=lambda kv: -kv[1])],
        },
        "cases": {name: int((sets == name).sum()) for name in np.unique(sets)},
    }
