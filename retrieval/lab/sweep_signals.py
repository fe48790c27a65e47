"""What a sweep fetches once per case: its L0 matches and, per distinct Weaviate query (QueryKey) of the grid's
points and the current settings, the L1 candidates, under the lookup's routing. Every grid point is then
scored on these signals alone (retrieval.lab.sweep)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval.config import Settings
from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch
from retrieval.core.lookup import search_text
from retrieval.core.pipeline import L1Query, Pipeline
from retrieval.core.protocols import LookupServices
from retrieval.core.runner import RunOptions, lookup_pipeline, route, run_pipeline
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import LookupLabError
from retrieval.evals.configs import DEPTH
from retrieval.evals.sets import EvalSet
from retrieval.evals.tuning import Grid
from retrieval.types.models import DEFAULT_MODEL
from retrieval.types.modes import SearchMode

Progress = Callable[[str, int, int], None]  # (stage, done, total)
# the settings that change what Weaviate is asked; the rest only re-rank or re-assess
QUERY_SETTINGS = ("search_mode", "hybrid_alpha", "top_k", "candidate_depth", "embedding_model")


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


def eval_pipeline(settings: Settings) -> Pipeline:
    """The lookup's pipeline as run_eval runs it (its top-k at least DEPTH)."""
    return lookup_pipeline(settings.with_(top_k=max(DEPTH, settings.top_k)).options())


def query_keys(settings: Settings) -> tuple[QueryKey, ...]:
    """The queries a lookup at these settings makes, as run_eval runs it (its top-k at least DEPTH)."""
    pipeline = eval_pipeline(settings)
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
    corpus: str = ""  # the corpus folder's name the set ran on: leave-one-corpus-out holds out all its sets
    norms: SupportNorms | None = None  # its knowledge base's support baselines (None: the model's reference ones)


def collect_signals(
    eval_set: EvalSet,
    services: LookupServices,
    settings: Settings,
    keys: Sequence[QueryKey],
    *,
    progress: Progress | None = None,
    other_models: Mapping[str, LookupServices] | None = None,
) -> list[CaseSignals]:
    """Every case's L0 matches and its candidates for each of `keys` (the runner's pipeline of that one query, under the
    lookup's routing). Keys of another embedding model use `other_models[model]`. Raises LookupLabError when L1 cannot answer."""
    by_model = {settings.embedding_model: services, **(other_models or {})}
    ready: dict[str, LookupServices] = {}
    for model in dict.fromkeys(k.model for k in keys):
        use = by_model.get(model)
        if use is None:
            raise LookupLabError(f"the sweep varies embedding_model over {model}, but no collection of that model was given")
        if use.store is None or use.embedder is None or not settings.l1_enabled:
            raise LookupLabError(f"a sweep needs L1, which is unavailable: {use.l1_unavailable or 'L1 is off or not connected'}")
        use.embedder.prime([search_text(c.query) for c in eval_set.cases])
        ready[model] = replace(use, l0=services.l0, recorder=None)
    out, total = [], len(eval_set.cases) * len(keys)
    options = settings.options()
    routed = lookup_pipeline(options)  # the lookup's routing: L1 filtered on the L0 domain when there is one
    for i, case in enumerate(eval_set.cases):
        query = search_text(case.query)
        hints = services.l0.match(query)
        run_options = RunOptions(category=route(hints, routed))
        found = {}
        for j, key in enumerate(keys):
            pipeline = Pipeline(f"sweep {key.kind}", (key.query(settings),))
            run = run_pipeline(query, pipeline, ready[key.model], options, replace(run_options, k=key.depth))
            if run.l1.error:
                raise LookupLabError(f"case {case.id} of {eval_set.name}: {run.l1.error}")
            found[key] = run.l1.candidates
            if progress:
                progress(f"Weaviate queries ({eval_set.name})", i * len(keys) + j + 1, total)
        relevant = frozenset(e for e, g in case.expected.items() if g > 0)
        corpus = Path(settings.corpus_dir).name
        out.append(CaseSignals(eval_set.name, case.id, relevant, hints.matches, found, query, corpus, services.norms))
    return out


def keys_for(grid: Grid, current: Settings) -> tuple[QueryKey, ...]:
    """Every distinct query of the grid's points and of the current settings, each once."""
    wanted = [current, *(point_settings(current, p) for p in grid.points())]
    return tuple(dict.fromkeys(k for s in wanted for k in query_keys(s)))
