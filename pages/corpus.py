"""Corpus: every entry with its frontmatter, domain, L0 index terms, chunk count and index state; ingest."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from app_support import ingest, keys, render, resources, sidebar
from app_support.render import md
from retrieval.store.corpus_status import corpus_health, entry_statuses, orphans, statuses_frame

ctx = resources.page_context()
settings = ctx.settings
corpus = ctx.corpus

st.title("Corpus")
st.caption(f"**{md(corpus.root)}**, indexed in the Weaviate collection **{md(settings.collection)}**.")

reading = ingest.index_reading(ctx)
state = reading.state
if reading.error and ctx.store is not None:
    render.error(
        "The collection cannot be read",
        reading.error,
        "Check that Weaviate is up (Retry connection); the index state shows as unknown meanwhile.",
    )
tokenizer = max_tokens = None
try:
    model = ctx.embedder()
    tokenizer, max_tokens = model.tokenizer, model.max_tokens
except Exception as exc:
    st.caption(f"Chunk counts are not shown: the embedding model cannot be loaded ({md(exc)}).")
statuses = entry_statuses(
    corpus, ctx.l0, tokenizer=tokenizer, max_tokens=max_tokens or 256, indexed_state=state, lost=reading.lost
)
counts = Counter(s.indexed for s in statuses)

m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("Entries", len(statuses))
m2.metric("Domains", len(corpus.domains))
m3.metric("Indexed", "–" if state is None else counts.get("indexed", 0))
m4.metric("To (re)index", "–" if state is None else len(statuses) - counts.get("indexed", 0))
m5.metric("Skipped files", len(corpus.problems))

nodes = sidebar.cluster_nodes(ctx)
if nodes and len(nodes) > 1:
    st.caption(
        f"Weaviate cluster of {len(nodes)} nodes; new collections get replication factor "
        f"{settings.replication_factor or 'default (1)'} and {settings.shards or 'the default number of'} shards, "
        f"queries and ingest run at consistency {settings.consistency or 'QUORUM (default)'}."
    )
    st.dataframe(pd.DataFrame([n.to_dict() for n in nodes]), hide_index=True)

# --- ingest ------------------------------------------------------------------------------------------------
ingest.show_last_result()
ingest.health_notice(ctx, corpus_health(corpus, reading), key="corpus_repair")
with st.container(border=True):
    st.markdown("**Index in Weaviate**")
    gone = orphans(corpus, state)
    st.caption(
        "*Ingest* embeds new and changed entries only and removes entries the corpus no longer has"
        + (f" ({len(gone)} now)" if gone else "")
        + ". *Re-index* drops the collection and embeds everything. "
        "*Reload* reads the markdown files again (after you edit them)."
    )
    if ctx.read_only:
        st.info(f"**Read-only**: Ingest, Re-index and Reload are off ({md(ctx.access.reason)}).", icon=":material/lock:")
    else:
        if ctx.store is None:
            st.caption("Ingest needs L1, which is unavailable (see the banner above).")
        a, b, c, _ = st.columns([1, 1, 2, 2])
        # primary only when there is something to do: entries to (re)index, or entries the corpus no longer has
        to_do = state is None or len(statuses) > counts.get("indexed", 0) or bool(gone)
        do_ingest = a.button("Ingest", type="primary" if to_do else "secondary", key="corpus_ingest", disabled=ctx.store is None)
        do_rebuild = b.button("Re-index", key="corpus_reindex", disabled=ctx.store is None)
        c.button("Reload corpus from disk", key="corpus_reload", on_click=resources.reload_corpus)
        if (do_ingest or do_rebuild) and ingest.run_ingest(ctx, rebuild=do_rebuild):
            st.rerun()

# --- entries -----------------------------------------------------------------------------------------------
st.subheader("Entries")
frame = statuses_frame(statuses)
pick_domain = st.multiselect("Domain", corpus.domains, key="corpus_domains")
if pick_domain:
    frame = frame[frame["domain"].isin(pick_domain)]
ids = list(frame["entry_id"])


def open_clicked_entry() -> None:
    """A row clicked in the table opens that entry below (the selectbox follows it)."""
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
            help="indexed / stale (changed since) / partial / lost (the vector index lost chunks: Repair) / missing / unknown",
        ),
        "index_terms": st.column_config.TextColumn("top L0 index terms"),
    },
)

if ids:
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
    entry = next((e for e in corpus.entries if e.entry_id == entry_id), None)
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

# --- problems ----------------------------------------------------------------------------------------------
st.subheader("Files that failed to load")
if corpus.problems:
    st.warning(
        f"{len(corpus.problems)} file(s) were skipped; the rest of the corpus loaded. Fix them and use "
        "*Reload corpus from disk*.",
        icon=":material/description:",
    )
    st.dataframe(pd.DataFrame([p.to_dict() for p in corpus.problems]), hide_index=True)
else:
    st.caption("none: every markdown file loaded.")
