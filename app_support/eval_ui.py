"""Picking an eval set, and checking it fits what is loaded (Filter comparison and Evaluate share this)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from retrieval.catalog import eval_set_files, known_corpora, preferred_eval_set, same_path
from retrieval.errors import LookupLabError
from retrieval.eval_sets import EvalSet, load_eval_set

from . import ingest, keys, render, resources
from .render import md


def pick_eval_set(ctx: resources.AppContext, *, key: str) -> tuple[EvalSet, Path] | None:
    """A selectbox over eval_sets/*.yaml and ../shared/eval_sets/*.yaml; the loaded set, or None (with a message)."""
    files = eval_set_files()
    if not files:
        st.info("No eval sets found: put YAML files in eval_sets/ (cases: [{id, query, expected, domain}]).")
        return None
    by_label = {f.label: f.path for f in files}
    label = st.selectbox("Eval set", list(by_label), index=preferred_eval_set(files, ctx.settings.corpus_dir),
                         key=key, bind="query-params",
                         help="eval_sets/*.yaml of the repo and ../shared/eval_sets/*.yaml. The first one written "
                              "for the loaded corpus (with answerable cases) is preselected.")
    path = by_label[label]
    try:
        return load_eval_set(path), path
    except LookupLabError as exc:
        render.error("The eval set cannot be used", exc, "Fix the file and field named above, then rerun.")
        return None


def _switch_corpus(label: str) -> None:
    st.session_state[keys.CORPUS] = label
    st.session_state.pop(keys.SET_COMPARISON, None)
    st.session_state.pop(keys.EVAL_REPORT, None)


def fits_loaded_corpus(ctx: resources.AppContext, eval_set: EvalSet, path: Path) -> bool:
    """True when the eval set is written for the loaded corpus and names only its entries. Otherwise says so
    and, when the corpus it wants is known, offers to switch to it (in its own collection)."""
    if eval_set.corpus_dir is not None and not same_path(eval_set.corpus_dir, ctx.settings.corpus_dir):
        wanted = next((c for c in known_corpora(resources.base_settings()) if same_path(c.path, eval_set.corpus_dir)), None)
        st.warning(f"**{md(eval_set.name)}** is written for the corpus **{md(eval_set.corpus_dir.name)}**, but the "
                   f"app has **{md(ctx.corpus.root)}** loaded: its expected entries do not exist here.",
                   icon=":material/swap_horiz:")
        if wanted is None:
            st.caption(f"{md(eval_set.corpus_dir)} is not a known corpus folder: start the app with "
                       "LOOKUP_CORPUS_DIR set to it.")
        else:
            st.button(f"Switch to corpus {wanted.label} (collection {wanted.collection})", type="primary",
                      key="switch_corpus", on_click=_switch_corpus, args=(wanted.label,))
        return False
    try:
        load_eval_set(path, known_ids=[e.entry_id for e in ctx.corpus.entries])
    except LookupLabError as exc:
        render.error("The eval set does not fit this corpus", exc,
                     "Fix the expected ids, or pick the corpus it was written for.")
        return False
    return True


def offer_ingest(ctx: resources.AppContext, *, key: str) -> None:
    """When the collection holds fewer entries than the corpus, say so and offer to ingest (with progress)."""
    ingest.show_last_result()
    indexed, _, why = resources.collection_summary(ctx)
    if why is not None or indexed is None or indexed >= len(ctx.corpus.entries):
        return
    st.warning(f"Collection **{md(ctx.settings.collection)}** holds {indexed} of {len(ctx.corpus.entries)} entries "
               "of this corpus: ingest it first, or the results measure a partial index.", icon=":material/upload:")
    if ctx.read_only:
        st.caption(f"Ingest is off: the app is read-only ({md(ctx.access.reason)}).")
        return
    if st.button(f"Ingest {len(ctx.corpus.entries)} entries into {ctx.settings.collection}", key=key):
        if ingest.run_ingest(ctx):
            st.rerun()
