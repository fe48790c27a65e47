"""Corpus: every entry with its frontmatter, domain, L0 index terms, chunk count and index state; ingest; add a folder."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from app_support import add_folder, corpus_view, ingest, render, resources, sidebar
from app_support.render import md


def summary(ctx: resources.AppContext, statuses: list[corpus_view.EntryStatus], known: bool) -> None:
    """Counts of entries, domains, indexed and skipped files; the cluster's nodes when there are several."""
    settings, corpus = ctx.settings, ctx.corpus
    counts = Counter(s.indexed for s in statuses)
    m1, m2, m3, m4, m5 = st.columns(5)
    m1.metric("Entries", len(statuses))
    m2.metric("Domains", len(corpus.domains))
    m3.metric("Indexed", counts.get("indexed", 0) if known else "–")
    m4.metric("To (re)index", len(statuses) - counts.get("indexed", 0) if known else "–")
    m5.metric("Skipped files", len(corpus.problems))
    nodes = sidebar.cluster_nodes(ctx)
    if nodes and len(nodes) > 1:
        st.caption(
            f"Weaviate cluster of {len(nodes)} nodes; new collections get replication factor "
            f"{settings.replication_factor or 'default (1)'} and {settings.shards or 'the default number of'} shards, "
            f"queries and ingest run at consistency {settings.consistency or 'QUORUM (default)'}."
        )
        st.dataframe(pd.DataFrame([n.to_dict() for n in nodes]), hide_index=True)


def problems(ctx: resources.AppContext) -> None:
    """The files that failed to load, each with its reason."""
    st.subheader("Files that failed to load")
    if ctx.corpus.problems:
        st.warning(
            f"{len(ctx.corpus.problems)} file(s) were skipped; the rest of the corpus loaded. Fix them and use "
            "*Reload corpus from disk*.",
            icon=":material/description:",
        )
        st.dataframe(pd.DataFrame([p.to_dict() for p in ctx.corpus.problems]), hide_index=True)
    else:
        st.caption("none: every markdown file loaded.")


def main() -> None:
    ctx = resources.page_context()
    st.title("Corpus")
    st.caption(f"**{md(ctx.corpus.root)}**, indexed in the Weaviate collection **{md(ctx.settings.collection)}**.")
    reading = ingest.index_reading(ctx)
    if reading.error and ctx.store is not None:
        render.error(
            "The collection cannot be read",
            reading.error,
            "Check that Weaviate is up (Retry connection); the index state shows as unknown meanwhile.",
        )
    statuses = corpus_view.statuses_for(ctx, reading)
    summary(ctx, statuses, known=reading.state is not None)
    corpus_view.index_section(ctx, statuses, reading)
    add_folder.section(ctx)
    st.subheader("Entries")
    ids = corpus_view.entry_table(statuses, ctx.corpus.domains)
    if ids:
        corpus_view.entry_details(ctx, statuses, ids)
    problems(ctx)


main()
