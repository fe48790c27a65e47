"""The Corpus page's *Add a folder*: check a folder of markdown files, show what it holds, then ingest it into a
collection of its own and make it the current corpus (the sidebar's Corpus choice and the URL). Never read-only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from retrieval.core.corpus import Corpus, open_folder
from retrieval.errors import CorpusError
from retrieval.evals.catalog import remember_corpus, same_path

from . import ingest, keys, resources
from .render import error, md

MAX_PROBLEMS_LISTED = 30
BAD_PATH_TODO = "Type the full path of a folder on the app's machine that holds markdown (*.md) files, then check it again."


def section(ctx: resources.AppContext) -> None:
    """The form that names a folder, what the last check found in it, and the button that ingests and uses it."""
    if ctx.read_only:
        return  # the Index section says what read-only turns off
    with st.container(border=True):
        st.markdown("**Add a folder**")
        st.caption(
            "Search another folder of markdown files (frontmatter is optional: an entry without a title takes its first "
            "`# Heading`, one without a domain its top-level folder). *Check* reads it and shows what it found; "
            "*Ingest and use* indexes it into a Weaviate collection of its own and makes it the current corpus."
        )
        with st.form("add_folder_form", border=False):
            typed = st.text_input("Folder path", key=keys.ADD_FOLDER_PATH, placeholder="/path/to/knowledge-base")
            if st.form_submit_button("Check folder"):
                st.session_state[keys.ADD_FOLDER_CHECKED] = (typed.strip(), _check(typed))
        checked = st.session_state.get(keys.ADD_FOLDER_CHECKED)
        if checked is None or checked[0] != (typed or "").strip():
            return  # nothing checked yet, or the path changed since
        found = checked[1]
        if isinstance(found, CorpusError):
            error("This folder cannot be added", found, BAD_PATH_TODO)
            return
        _found(found)
        _offer_ingest(ctx, found)


def _check(typed: str) -> Corpus | CorpusError:
    try:
        return open_folder(typed)
    except CorpusError as exc:
        return exc


def _found(corpus: Corpus) -> None:
    """What the folder holds: counts, its entries (title, domain, frontmatter or not) and the files that failed."""
    bare = corpus.without_frontmatter
    a, b, c, d = st.columns(4)
    a.metric("Entries found", len(corpus.entries))
    b.metric("Domains", len(corpus.domains))
    c.metric("Without frontmatter", len(bare))
    d.metric("Files that failed", len(corpus.problems))
    st.caption(f"In **{md(corpus.root)}**: domains {md(', '.join(corpus.domains) or 'none')}.")
    if corpus.entries:
        bare_ids = {e.entry_id for e in bare}
        rows = [
            {"entry_id": e.entry_id, "title": e.title, "domain": e.domain, "frontmatter": e.entry_id not in bare_ids}
            for e in corpus.entries
        ]
        st.dataframe(pd.DataFrame(rows), hide_index=True, height=min(38 + 35 * len(rows), 320))
    if corpus.problems:
        st.warning(
            f"{len(corpus.problems)} file(s) cannot be read and would be skipped; the rest can be ingested. Fix them "
            "and check again to include them.",
            icon=":material/description:",
        )
        shown = corpus.problems[:MAX_PROBLEMS_LISTED]
        more = len(corpus.problems) - len(shown)
        st.markdown("\n".join(f"- {md(p.reason)}" for p in shown) + (f"\n- … and {more} more" if more else ""))


def _offer_ingest(ctx: resources.AppContext, corpus: Corpus) -> None:
    """The Ingest and use button; on success the sidebar takes the folder on the next run."""
    if not corpus.entries:
        st.error("No entry of this folder can be read: fix the files above, then check again.", icon=":material/error:")
        return
    folder = Path(corpus.root)
    choice = resources.folder_choice(ctx.settings, folder)
    current = same_path(folder, ctx.corpus.root)
    st.caption(
        f"It will be the corpus **{md(choice.label)}**, indexed in the collection **{md(choice.collection)}**"
        + (" (the current corpus already)." if current else ".")
    )
    if ctx.store is None:
        st.caption("Ingest needs L1, which is unavailable (see the banner above).")
    label = f"Ingest {len(corpus.entries)} entries and use this folder"
    if not st.button(label, type="primary", key="add_folder_ingest", disabled=ctx.store is None):
        return
    settings = ctx.settings.with_(corpus_dir=choice.path, collection=choice.collection)
    resources.corpus_index.clear(str(choice.path))  # the files as they are now, not as an earlier visit read them
    if ingest.run_ingest(resources.context(settings)):
        remember_corpus(ctx.settings, choice.path)
        st.session_state[keys.CORPUS_SWITCH] = choice.label
        st.session_state.pop(keys.ADD_FOLDER_CHECKED, None)
        st.rerun()
