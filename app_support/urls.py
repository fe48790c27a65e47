"""URL query parameters. The widgets bound to the URL are listed in keys.URL_KEYS; links built here carry
the shared settings that differ from their defaults, as those widgets would write them."""

from __future__ import annotations

import streamlit as st

from retrieval.config import Settings
from retrieval.evals.catalog import same_path
from retrieval.lab.runs import RunSummary
from retrieval.types.models import MODELS

from . import keys, resources
from .setting_widgets import RANKING_WIDGETS, url_params


def setting_params(settings: Settings, base: Settings) -> dict[str, str]:
    """The sidebar settings of `settings` that differ from `base` (the defaults), as query parameters."""
    return url_params(settings, base, corpus_label=st.session_state.get(keys.CORPUS))


def lookup_params(query: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open the Lookup page on `query` with these settings."""
    return {**setting_params(settings, base), keys.QUERY: query}


def compare_params(query: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open Filter comparison on `query` with these settings, comparing the L1 query the
    lookup ran (its search mode: fusion, near_vector or hybrid)."""
    return {**setting_params(settings, base), keys.COMPARE_QUERY: query, keys.COMPARE_KIND: str(settings.search_mode)}


def entry_params(entry_id: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open the Corpus page on one entry, in the corpus these settings load."""
    return {**setting_params(settings, base), keys.CORPUS_ENTRY: entry_id}


def run_lookup_params(query: str, run: RunSummary, base: Settings) -> dict[str, str]:
    """Query parameters that open Lookup on `query` with the run's corpus, model, top-k, L1 switch, mode, alpha and
    the ranking settings of the sidebar's expander (weights, depth, missing score, support threshold)."""
    s = run.settings
    model = run.embedding_model if run.embedding_model in MODELS else base.embedding_model
    ranking = {w.field: w.parse(s[w.field]) for w in RANKING_WIDGETS if w.parse and s.get(w.field) is not None}
    settings = base.with_(
        embedding_model=model,
        top_k=int(s.get("top_k", base.top_k)),
        l1_enabled=bool(s.get("l1_enabled", base.l1_enabled)),
        search_mode=str(s.get("search_mode", base.search_mode)),
        hybrid_alpha=float(s.get("hybrid_alpha", base.hybrid_alpha)),
        **{k: v for k, v in ranking.items() if v is not None},
    )
    params = lookup_params(query, settings, base)
    choice = next((c for c in resources.corpus_choices(base) if run.corpus and same_path(c.path, run.corpus)), None)
    if choice is not None and not same_path(choice.path, base.corpus_dir):
        params["corpus"] = choice.label
    return params
