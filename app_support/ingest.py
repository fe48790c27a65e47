"""Ingest / re-index the current corpus with a progress bar (used by the Corpus and Filter comparison pages)."""

from __future__ import annotations

import streamlit as st

from retrieval.errors import LookupLabError

from . import keys, resources
from .render import error, md


def run_ingest(ctx: resources.AppContext, *, rebuild: bool = False) -> bool:
    """Bring the collection in line with the corpus (dropping it first when `rebuild`). True on success."""
    store = ctx.store
    if ctx.read_only:  # the pages offer no button then; this holds should a click arrive anyway
        error("Cannot ingest", f"the app is read-only ({ctx.access.reason})", "Ask whoever runs the app.")
        return False
    if store is None:
        error("Cannot ingest", ctx.conn.error or "L1 is not connected", "Start Weaviate, then use Retry connection.")
        return False
    n = len(ctx.corpus.entries)
    bar = st.progress(0.0, text=f"Preparing to index {n} entries into {ctx.settings.collection}…")

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(done / total if total else 1.0, text=f"{stage}: {done} of {total} changed entries")

    try:
        model = resources.embedder()
        if rebuild:
            store.drop()
        report = store.ingest(ctx.corpus, model, progress=progress)
    except LookupLabError as exc:
        bar.empty()
        error("Ingest failed", exc, "Fix the cause above and press the button again; finished entries are kept.")
        return False
    except Exception as exc:
        bar.empty()
        error(
            "Ingest failed",
            f"{type(exc).__name__}: {exc}",
            "Check that Weaviate is up (Retry connection), then press the button again.",
        )
        return False
    bar.progress(1.0, text="done")
    st.cache_data.clear()  # the sidebar's indexed counts
    st.session_state[keys.INGEST_RESULT] = (
        f"Indexed **{md(ctx.settings.collection)}** in {report.seconds:.1f} s: {report.added} added, "
        f"{report.updated} updated, {report.unchanged} unchanged, {report.removed} removed, "
        f"{report.chunks_embedded} chunks embedded."
    )
    return True


def show_last_result() -> None:
    msg = st.session_state.pop(keys.INGEST_RESULT, None)
    if msg:
        st.success(msg, icon=":material/check_circle:")
