"""Ingest / re-index the current corpus with a progress bar (used by the Corpus and Filter comparison pages), and
the index's health: a repair notice with its button, or a transient 'loading' status that reruns when loaded."""

from __future__ import annotations

from typing import Any

import streamlit as st

from retrieval.store import indexing
from retrieval.store.corpus_status import IndexHealth, IndexReading, corpus_health, read_index
from retrieval.store.support_fit import ensure_fit

from . import keys, resources
from .jobs import JobBar, run_job
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

    def work(bar: JobBar) -> tuple[Any, Any, Any]:
        model = ctx.embedder()
        if rebuild:
            store.drop()
        report = indexing.ingest(store, ctx.corpus, model, progress=bar.stages)
        norms, ran = ensure_fit(store, ctx.corpus, ctx.lookup_services(record=False), ctx.settings, progress=bar.stages)
        return report, norms, ran

    done = run_job(
        "Ingest failed",
        work,
        fix="Fix the cause above and press the button again; finished entries are kept.",
        when_down="Check that Weaviate is up (Retry connection), then press the button again.",
        start=f"Preparing to index {n} entries into {ctx.settings.collection}…",
    )
    if done is None:
        return False
    report, norms, ran = done
    st.cache_data.clear()  # the sidebar's indexed counts
    repaired = " The index had lost entries: they are indexed again." if report.repaired_index else ""
    st.session_state[keys.INGEST_RESULT] = (
        f"Indexed **{md(ctx.settings.collection)}** in {report.seconds:.1f} s: {report.added} added, "
        f"{report.updated} updated, {report.unchanged} unchanged, {report.removed} removed, "
        f"{report.chunks_embedded} chunks embedded.{repaired} {fit_note(norms, ran)}"
    )
    return True


def fit_note(norms, ran) -> str:
    """The support fit after an ingest, in one sentence."""
    if norms is None:
        return "The support estimate reads the reference baselines (too few probes in this knowledge base)."
    if ran is None:
        return f"Support baselines unchanged (fit {norms.fit_id})."
    return f"Support baselines fitted on {ran.probes} probes of this knowledge base in {ran.seconds:.1f} s (fit {norms.fit_id})."


@st.cache_data(ttl=15, show_spinner=False)
def _reading(target: str, collection: str, _store) -> IndexReading:
    return read_index(_store)


def index_reading(ctx: resources.AppContext) -> IndexReading:
    """The current collection as read_index sees it. Loading is asked every run (it passes in seconds); the
    rest is read at most every 15 s, and again at once after an ingest."""
    store = ctx.store
    loading = store.loading() if store is not None else None
    if store is None or loading:
        return IndexReading(None, loading=loading, error=None if loading else ctx.conn.error or "L1 is not connected")
    reading = _reading(ctx.conn.target, ctx.settings.collection, store)
    if reading.loading or reading.error:  # not kept for 15 s
        _reading.clear()
    return reading


def index_health(ctx: resources.AppContext) -> IndexHealth:
    """The state of the current collection against the corpus."""
    return corpus_health(ctx.corpus, index_reading(ctx))


def watch_loading(ctx: resources.AppContext) -> None:
    """While Weaviate loads the index, check every second and rerun the app once it can be searched."""

    @st.fragment(run_every=1.0)
    def check() -> None:
        if ctx.store is None or ctx.store.loading() is None:
            st.cache_data.clear()  # figures read while loading
            st.rerun()

    check()


def health_badge(ctx: resources.AppContext) -> IndexHealth:
    """In the sidebar: a badge and a caption when the index needs repair or is loading (then watched)."""
    health = index_health(ctx)
    if health.state == "needs_repair":
        st.markdown(":red-badge[Index needs repair]")
        st.caption(f"{md(health.message)} Repair it on the Corpus page.")
    elif health.state == "loading":
        st.markdown(":orange-badge[Loading the index…]")
        st.caption(md(health.message))
        watch_loading(ctx)
    return health


def health_notice(ctx: resources.AppContext, health: IndexHealth, *, key: str) -> None:
    """On a page: the repair notice and its button (none when read-only), or the loading status."""
    if health.state == "loading":
        st.info(f"**{md(health.message)}** This page reloads when it is done.", icon=":material/hourglass_top:")
    elif health.state == "needs_repair":
        st.error(f"**{md(health.message)}**", icon=":material/healing:")
        if ctx.read_only:
            st.caption(f"Repair is off: the app is read-only ({md(ctx.access.reason)}).")
        elif st.button(f"Repair: index the {health.missing} missing entries again", key=key, type="primary") and run_ingest(ctx):
            st.session_state.pop(keys.LAST_LOOKUP, None)  # the Lookup page runs its query again on the repaired index
            st.rerun()
    elif health.partition_behind:
        st.warning(f"**{md(health.message)}**", icon=":material/call_split:")


def show_last_result() -> None:
    msg = st.session_state.pop(keys.INGEST_RESULT, None)
    if msg:
        st.success(msg, icon=":material/check_circle:")
