"""URL query parameters. The widgets bound to the URL are listed in keys.URL_KEYS; links built here carry
the shared settings that differ from their defaults, as those widgets would write them."""

from __future__ import annotations

import streamlit as st

from retrieval.config import Settings

from . import keys


def setting_params(settings: Settings, base: Settings) -> dict[str, str]:
    """The sidebar settings of `settings` that differ from `base` (the defaults), as query parameters."""
    out: dict[str, str] = {}
    label = st.session_state.get(keys.CORPUS)
    if label and settings.corpus_dir != base.corpus_dir:
        out[keys.CORPUS] = str(label)
    if settings.embedding_model != base.embedding_model:
        out[keys.MODEL] = settings.embedding_model
    if settings.top_k != base.top_k:
        out[keys.TOP_K] = str(settings.top_k)
    if settings.l1_enabled != base.l1_enabled:
        out[keys.L1_ON] = "true" if settings.l1_enabled else "false"
    if settings.search_mode != base.search_mode:
        out[keys.MODE] = settings.search_mode
    if settings.search_mode == "hybrid" and settings.hybrid_alpha != base.hybrid_alpha:
        out[keys.ALPHA] = str(settings.hybrid_alpha)
    return out


def lookup_params(query: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open the Lookup page on `query` with these settings."""
    return {**setting_params(settings, base), keys.QUERY: query}
