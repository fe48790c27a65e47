"""The settings of a run in one line: the model, the mode, the weights the mode uses, top-k and the support threshold,
as `name=value` with the settings' own names (what LOOKUP_* and `--set` take). Evaluate, Sweep, Runs and the HTML
report show it, and the configurations' meanings follow the mode it names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from retrieval.core.support import SUPPORT_MODELS
from retrieval.types.modes import LookupMode

# The settings each mode ranks with, in the strip's order: lexical_weight only where a BM25F list is fused,
# hybrid_alpha only in hybrid.
_RANKING = {
    LookupMode.FUSION: ("vector_weight", "lexical_weight", "l0_weight", "name_weight", "candidate_depth", "missing_score"),
    LookupMode.NEAR_VECTOR: ("vector_weight", "l0_weight", "name_weight", "candidate_depth", "missing_score"),
    LookupMode.HYBRID: ("hybrid_alpha", "vector_weight", "l0_weight", "name_weight", "candidate_depth", "missing_score"),
}
LOOKUP_MEANING = {
    LookupMode.FUSION: "L0 + the L1 vector and BM25F queries, fused",
    LookupMode.NEAR_VECTOR: "L0 + the L1 vector query, fused with L0",
    LookupMode.HYBRID: "L0 + Weaviate's hybrid query, fused with L0",
}
CONFIG_MEANING = {
    "l0_only": "the L0 keyword matches alone",
    "l1_unfiltered": "L1 vector search without any filter",
    "l1_filtered": "L1 vector search filtered on the L0 domain when it is unambiguous",
    "bm25": "Weaviate BM25F over the entry fields, with the same L0 filter rule",
    "hybrid": "Weaviate hybrid (BM25F + vector), unfiltered",
}


def _values(settings: Any) -> Mapping[str, Any]:
    if is_dataclass(settings) and not isinstance(settings, type):
        return {f.name: getattr(settings, f.name) for f in fields(settings)}
    return settings


def value_text(value: Any) -> str:
    """A setting's value as it is written: 2.5 (not 2.500), 0 for 0.0, text as it is; – for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3g}" if value != round(value, 3) else f"{value:g}"
    return str(value)


def mode_of(settings: Any) -> LookupMode | None:
    raw = _values(settings).get("search_mode")
    try:
        return None if raw is None else LookupMode(str(raw))
    except ValueError:
        return None


def strip_items(settings: Any) -> list[tuple[str, str]]:
    """(name, value) of the settings that decide a run's ranking and its support claims, for a Settings or a mapping
    of setting names (a report's or a saved run's settings). A support_threshold left to the model reads as the model's
    fitted cut, marked so."""
    values = _values(settings)
    mode = mode_of(values)
    names = ["embedding_model", "search_mode", *(_RANKING[mode] if mode else ()), "top_k"]
    items = [(name, value_text(values[name])) for name in names if name in values]
    if "support_threshold" in values:
        threshold = values["support_threshold"]
        if threshold is None:
            items.append(("support_threshold", _fitted(values.get("embedding_model"))))
        else:
            items.append(("support_threshold", value_text(threshold)))
    return items


def _fitted(model: Any) -> str:
    """A threshold left to the model: the cut fitted for it, or just 'fitted' for a model without one."""
    fitted = SUPPORT_MODELS.get(str(model))
    return "fitted" if fitted is None else f"{value_text(fitted.cut(None))} (fitted)"


def strip_text(settings: Any, separator: str = " · ") -> str:
    """strip_items as one line: `embedding_model=bge-small-en-v1.5 · search_mode=fusion · vector_weight=2.5 · …`."""
    return separator.join(f"{name}={value}" for name, value in strip_items(settings)) or "–"


def depth_note(run_top_k: int, sidebar_top_k: int) -> str | None:
    """Why an eval's top_k is not the sidebar's (an eval ranks at least DEPTH deep); None when they agree."""
    if int(run_top_k) == int(sidebar_top_k):
        return None
    return (
        f"top_k={run_top_k} here, {sidebar_top_k} in the sidebar: an eval ranks every configuration at least {run_top_k} "
        "deep, as far as MRR@10 and nDCG@10 look. The sidebar's top-k is how many results Lookup shows."
    )


def config_meaning(config: str, settings: Any) -> str:
    """What a configuration of an eval runs, in words; `lookup`'s follows the settings' mode."""
    if config == "lookup":
        mode = mode_of(settings) or LookupMode.FUSION
        return f"lookup_knowledge as the tool runs it ({LOOKUP_MEANING[mode]})"
    return CONFIG_MEANING.get(config, config)
