"""Lookup Lab: the router and the frame (page config, shared settings, connection status, L1 banner)."""

from __future__ import annotations

import logging

import streamlit as st

from app_support import keys, render, resources, sidebar
from retrieval.errors import LookupLabError

st.set_page_config(page_title="Lookup Lab", page_icon="🔎", layout="wide")  # an emoji: no icon font fetched, works offline

PAGES = [
    st.Page("pages/lookup.py", title="Lookup", icon=":material/search:", default=True),
    st.Page(
        "pages/filter_comparison.py", title="Filter comparison", icon=":material/compare_arrows:", url_path="filter_comparison"
    ),
    st.Page("pages/evaluate.py", title="Evaluate", icon=":material/rule:", url_path="evaluate"),
    st.Page("pages/runs.py", title="Runs", icon=":material/timeline:", url_path="runs"),
    st.Page("pages/sweep.py", title="Sweep", icon=":material/tune:", url_path="sweep"),
    st.Page("pages/invocations.py", title="Invocations", icon=":material/history:", url_path="invocations"),
    st.Page("pages/traffic.py", title="Traffic", icon=":material/monitoring:", url_path="traffic"),
    st.Page("pages/corpus.py", title="Corpus", icon=":material/library_books:", url_path="corpus"),
]
page = st.navigation(PAGES)

try:
    base = resources.base_settings()
except LookupLabError as exc:
    render.error("The settings cannot be used", exc, "Fix lookup.yaml or the LOOKUP_* variable named above, then reload.")
    st.stop()

sidebar.settings_widgets(base)
try:
    ctx = resources.context(resources.current_settings(base))
except LookupLabError as exc:
    render.error(
        "The corpus cannot be read",
        exc,
        "Pick another corpus in the sidebar, or set LOOKUP_CORPUS_DIR to a folder of markdown files.",
    )
    st.stop()
st.session_state[keys.CONTEXT] = ctx
sidebar.status(ctx)
sidebar.l1_banner(ctx)

try:
    page.run()
except Exception as exc:
    logging.getLogger("lookup_lab").exception("page %r failed", page.title)
    render.unexpected(exc)
