"""URL query parameters. The widgets bound to the URL are listed in keys.URL_KEYS; links built here carry
the shared settings that differ from their defaults, as those widgets would write them."""

from __future__ import annotations

import streamlit as st

from retrieval.config import Settings

from . import keys
from .setting_widgets import url_params


def setting_params(settings: Settings, base: Settings) -> dict[str, str]:
    """The sidebar settings of `settings` that differ from `base` (the defaults), as query parameters."""
    return url_params(settings, base, corpus_label=st.session_state.get(keys.CORPUS))


def lookup_params(query: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open the Lookup page on `query` with these settings."""
    return {**setting_params(settings, base), keys.QUERY: query}


def entry_params(entry_id: str, settings: Settings, base: Settings) -> dict[str, str]:
    """Query parameters that open the Corpus page on one entry, in the corpus these settings load."""
    return {**setting_params(settings, base), keys.CORPUS_ENTRY: entry_id}
