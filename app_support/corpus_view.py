"""The Corpus page's parts: each entry's status, the index section (ingest, re-index, reload) and one entry's details."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from retrieval.store.corpus_status import EntryStatus, IndexReading, corpus_health, entry_statuses, orphans, statuses_frame

from . import ingest, keys, render, resources
from .render import md

__all__ = ["EntryStatus", "entry_details", "entry_table", "index_section", "statuses_for"]


def statuses_for(ctx: resources.AppContext, reading: IndexReading) -> list[EntryStatus]:
    """Every entry's domain, L0 terms, chunk count (when the model loads) and index state."""
    tokenizer = max_tokens = None
    try:
        model = ctx.embedder()
        tokenizer, max_tokens = model.tokenizer, model.max_tokens
    except Exception as exc:
        st.caption(f"Chunk counts are not shown: the embedding model cannot be loaded ({md(exc)}).")
    return list(
        entry_statuses(
            ctx.corpus, ctx.l0, tokenizer=tokenizer, max_tokens=max_tokens or 256, indexed_state=reading.state, lost=reading.lost
        )
    )


def index_section(ctx: resources.AppContext, statuses: Sequence[EntryStatus], reading: IndexReading) -> None:
    """The last ingest's result, the index's health, and the Ingest, Re-index and Reload buttons."""
    state = reading.state
    indexed = Counter(s.indexed for s in statuses).get("indexed", 0)
    ingest.show_last_result()
    ingest.health_notice(ctx, corpus_health(ctx.corpus, reading), key="corpus_repair")
    with st.container(border=True):
        st.markdown("**Index in Weaviate**")
        gone = orphans(ctx.corpus, state)
        st.caption(
            "*Ingest* embeds new and changed entries only and removes entries the corpus no longer has"
            + (f" ({len(gone)} now)" if gone else "")
            + ". *Re-index* drops the collection and embeds everything. "
            "*Reload* reads the markdown files again (after you edit them)."
        )
        if ctx.read_only:
            st.info(f"**Read-only**: Ingest, Re-index and Reload are off ({md(ctx.access.reason)}).", icon=":material/lock:")
            return
        if ctx.store is None:
            st.caption("Ingest needs L1, which is unavailable (see the banner above).")
        a, b, c, _ = st.columns([1, 1, 2, 2])
        # primary only when there is something to do: entries to (re)index, or entries the corpus no longer has
        to_do = state is None or len(statuses) > indexed or bool(gone)
        do_ingest = a.button("Ingest", type="primary" if to_do else "secondary", key="corpus_ingest", disabled=ctx.store is None)
        do_rebuild = b.button("Re-index", key="corpus_reindex", disabled=ctx.store is None)
        c.button("Reload corpus from disk", key="corpus_reload", on_click=resources.reload_corpus)
        if (do_ingest or do_rebuild) and ingest.run_ingest(ctx, rebuild=do_rebuild):
            st.rerun()


def entry_table(statuses: Sequence[EntryStatus], domains: Sequence[str]) -> list[str]:
    """The entries (of the domains picked) as a table whose clicked row opens below; their ids."""
    frame = statuses_frame(list(statuses))
    pick_domain = st.multiselect("Domain", domains, key="corpus_domains")
    if pick_domain:
        frame = frame[frame["domain"].isin(pick_domain)]
    ids = list(frame["entry_id"])

    def open_clicked_entry() -> None:
        rows = st.session_state[keys.CORPUS_TABLE].selection.rows
        if rows and rows[0] < len(ids):
            st.session_state[keys.CORPUS_ENTRY] = ids[rows[0]]

    st.caption("Click a row to open its entry below.")
    st.dataframe(
        frame,
        hide_index=True,
        key=keys.CORPUS_TABLE,
        on_select=open_clicked_entry,
        selection_mode="single-row",
        column_config={
            "indexed": st.column_config.TextColumn(
                "indexed",
                help="indexed / stale (changed since) / partial / lost (the vector index lost chunks: Repair) / missing / "
                "unknown",
            ),
            "index_terms": st.column_config.TextColumn("top L0 index terms"),
        },
    )
    return ids


def entry_details(ctx: resources.AppContext, statuses: Sequence[EntryStatus], ids: list[str]) -> None:
    """One entry (picked, clicked or named in the URL): its frontmatter, text and L0 index terms."""
    wanted = st.session_state.get(keys.CORPUS_ENTRY) or st.query_params.get(keys.CORPUS_ENTRY)
    if wanted and wanted not in ids and wanted in {s.entry_id for s in statuses}:
        st.caption(f"{md(wanted)} is not in the domains picked above: clear the domain filter to open it.")
    entry_id = st.selectbox(
        "Entry details", ids, key=keys.CORPUS_ENTRY, bind="query-params", help="In the URL: /corpus?entry=<entry id>."
    )
    chosen = next(s for s in statuses if s.entry_id == entry_id)
    left, right = st.columns(2)
    with left:
        st.markdown(
            f"**{md(chosen.title)}**: domain **{md(chosen.domain)}**, {chosen.chunks if chosen.chunks is not None else '?'} "
            f"chunk(s), index state **{md(chosen.indexed)}**"
        )
        st.markdown("Frontmatter")
        st.json(render.as_json(chosen.frontmatter))
    entry = next((e for e in ctx.corpus.entries if e.entry_id == entry_id), None)
    if entry is not None:
        with st.expander(f"Text of {entry_id} (the markdown below the frontmatter)", expanded=True):
            st.code(entry.text, language="markdown", wrap_lines=True)  # as written: corpus text is never live Markdown
    with right:
        st.markdown(f"L0 index terms ({len(chosen.index_terms)})")
        st.dataframe(
            pd.DataFrame(list(chosen.index_terms), columns=["term", "field", "weight", "key"]),
            hide_index=True,
            height=min(38 + 35 * max(len(chosen.index_terms), 1), 420),
            column_config={"key": st.column_config.TextColumn("match key", help="the normalised form L0 compares")},
        )
