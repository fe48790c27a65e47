"""Judging a lookup's results (Lookup, and a selected call on Invocations): mark the relevant entries, or
that none is, and add the query as a case to an eval set (retrieval.lab.judgments does the work)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from retrieval.errors import LookupLabError
from retrieval.lab import judgments

from . import eval_ui, keys, render, resources
from .render import md

KNOWN, NEW = "an eval set the app knows", "a new eval set"
AUTO, NO_DOMAIN = "__auto__", "(none)"


def judge_results(
    ctx: resources.AppContext,
    *,
    query: str,
    found: Sequence[dict[str, Any]],
    routed: str | None,
    source: str,
    key: str,
    invocation: str | None = None,
) -> None:
    """An expander under the results: which are relevant (or none), to which eval set, and the Add button.
    `found`: the results as dicts with entry_id (and domain); `invocation`: the recorded call; `key` keeps two apart."""
    with st.expander("Judge these results: add this query to an eval set", icon=":material/fact_check:"):
        if ctx.read_only:
            st.caption(f"Judging is off: the app is read-only ({md(ctx.access.reason)}), and judging writes eval set files.")
            return
        entries = {e.entry_id: e for e in ctx.corpus.entries}
        picked, none = _relevant(found, entries, key)
        unmarked = judgments.shown_not_relevant([str(f["entry_id"]) for f in found], picked)
        if unmarked:
            st.caption(f"The {len(unmarked)} results above left unmarked go to the case as judged not relevant.")
        domain_of = {**{e: v.domain for e, v in entries.items()}, **{str(f["entry_id"]): f.get("domain") for f in found}}
        c1, c2 = st.columns(2)
        chosen = _case_domain(ctx, c1, judgments.suggest_domain([domain_of.get(e) for e in picked], routed), key)
        case_id = c2.text_input("Case id", key=f"{key}_case_id", placeholder="generated from the query, unique in the set")
        target = _target(ctx, key)
        if target is None:
            return
        path, new = target
        st.caption(f"{'Creates' if new else 'Appends to'} **{md(path.resolve())}**")
        if not st.button("Add the case", key=f"{key}_add", type="primary", disabled=not (picked or none)):
            if not (picked or none):
                st.caption("Mark the relevant entries, or tick 'None is relevant', to add the case.")
            return
        judgment = judgments.Judgment(query, tuple(picked), chosen, case_id, source, unmarked, invocation)
        _add_case(ctx, judgment, path, new=new, known_ids=entries)


def _relevant(found: Sequence[dict[str, Any]], entries: dict[str, Any], key: str) -> tuple[list[str], bool]:
    """The entries marked relevant (the shown results first, then the rest of the corpus), and 'none is'."""
    shown = [str(f["entry_id"]) for f in found]
    none = st.checkbox("None is relevant: no entry of the corpus answers this query (an unanswerable case)", key=f"{key}_none")
    relevant = st.multiselect(
        "Relevant entries",
        shown + [e for e in entries if e not in shown],
        key=f"{key}_relevant",
        disabled=none,
        format_func=lambda e: f"#{shown.index(e) + 1} {e}" if e in shown else e,
        help="The results above first (by rank), then every other entry of the corpus: a right answer the lookup missed. "
        "The results above you leave unmarked are written to the case as not relevant (judged, not unjudged).",
    )
    return ([] if none else list(relevant)), none


def _case_domain(ctx: resources.AppContext, column: Any, suggested: str | None, key: str) -> str | None:
    """The case's domain: the one the judgment suggests, none, or one of the corpus."""
    domain = column.selectbox(
        "Domain of the case",
        [AUTO, NO_DOMAIN, *ctx.corpus.domains],
        key=f"{key}_domain",
        format_func=lambda d: "from the judgment" if d == AUTO else d,
    )
    chosen = suggested if domain == AUTO else (None if domain == NO_DOMAIN else domain)
    column.caption(f"The case gets domain: **{md(chosen)}**" if chosen else "The case gets no domain.")
    return chosen


def _add_case(
    ctx: resources.AppContext, judgment: judgments.Judgment, path: Path, *, new: bool, known_ids: dict[str, Any]
) -> None:
    """Write the case (a new set or one more case), then offer to run the set in Evaluate."""
    try:
        if new:
            out = judgments.create_eval_set(path, judgment, corpus_dir=ctx.settings.corpus_dir, known_ids=known_ids)
        else:
            out = judgments.append_case(path, judgment, known_ids=known_ids)
    except LookupLabError as exc:
        render.error("The case was not added", exc, "The file is as it was. Fix what the message names and add it again.")
        return
    verb = "Created" if out.created else "Added to"
    st.success(f"{verb} **{md(out.path)}**: case **{md(out.case_id)}** ({out.cases} cases now).", icon=":material/check:")
    files = eval_ui.known_set_files(ctx.settings)
    listed = next((f for f in files if Path(f.path).resolve() == Path(out.path).resolve()), None)
    if listed is not None:
        st.page_link(
            "pages/evaluate.py",
            label=f"Run {listed.label} in Evaluate",
            icon=":material/play_arrow:",
            query_params={keys.EVAL_RUN_SET: listed.label},
        )
    else:
        st.caption(
            "Evaluate lists eval_sets/, ../shared/eval_sets/ and the judgments folder: run this file with "
            "`python -m retrieval eval`."
        )


def _target(ctx: resources.AppContext, key: str) -> tuple[Path, bool] | None:
    """(path, is new) of the eval set the case goes to, or None with a message. Only sets that fit the loaded
    corpus are offered; by default the case goes to the judgments folder (Settings.judged_sets_dir)."""
    folder = ctx.settings.judged_sets_dir
    files = eval_ui.known_set_files(ctx.settings)
    known = [e.entry_id for e in ctx.corpus.entries]
    sets = [t for t in judgments.target_sets(known, files, ctx.settings.corpus_dir) if t.error is None and t.fits]
    judged = [i for i, t in enumerate(sets) if t.label.startswith(judgments.JUDGED_LABEL)]
    where = st.radio("Add to", [KNOWN, NEW], index=0 if judged else 1, key=f"{key}_where", horizontal=True)
    if where == NEW:
        n1, n2 = st.columns(2)
        default = re.sub(r"[^A-Za-z0-9._-]", "-", f"judged-{Path(ctx.settings.corpus_dir).resolve().name}")
        name = n1.text_input("Name of the new set", value=default, key=f"{key}_new_name")
        other = n2.text_input("or a path", key=f"{key}_new_path", placeholder=f"default: {folder}/<name>.yaml")
        try:
            if other.strip():
                return Path(other.strip()).expanduser(), True
            if not name.strip():
                st.caption(f"Name the new set (it is written to {md(folder)} and listed in Evaluate).")
                return None
            return judgments.new_set_path(name, folder), True
        except LookupLabError as exc:
            st.warning(md(exc), icon=":material/warning:")
            return None
    if not sets:
        st.caption("No eval set fits the loaded corpus: create a new one.")
        return None
    label = st.selectbox(
        "Eval set (those that fit the loaded corpus)",
        [t.label for t in sets],
        index=judged[0] if judged else 0,
        key=f"{key}_set",
        format_func=lambda lb: next(f"{t.label} ({t.cases} cases)" for t in sets if t.label == lb),
    )
    return next(t for t in sets if t.label == label).path, False
