"""Why not this entry? Under Lookup's results: a picker of the knowledge base's entries, the picked entry's trace
(retrieval.core.explain: the verdict first, then each stage), its fusion parts beside the top result's as a chart, and
on request what it would take (retrieval.core.remedies) with a link that opens Lookup with that change. Records nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from retrieval.config import Settings
from retrieval.core.corpus import Entry
from retrieval.core.explain import EntryTrace, ListRank, SignalStage, explain_entry
from retrieval.core.miss_cause import SIGNAL_LABELS
from retrieval.core.remedies import FILTER_OFF, Remedies, Tried, what_it_would_take
from retrieval.errors import LookupLabError

from . import charts, keys, render, resources, urls
from .render import md

REMEDY_SETTINGS = frozenset({"search_mode", "vector_weight", "lexical_weight", "l0_weight", "name_weight", "candidate_depth"})


def entry_label(entry: Entry) -> str:
    """How the picker shows an entry: its title, then its id (both searchable as the box is typed in)."""
    return f"{entry.title} — {entry.entry_id}"


def why_params(query: str, settings: Settings, base: Settings, entry_id: str) -> dict[str, str]:
    """Query parameters that open Lookup on `query` with these settings and `entry_id` explained under the results."""
    return {**urls.lookup_params(query, settings, base), keys.WHY: entry_id}


def _follow_url(entries: Mapping[str, Entry]) -> None:
    """A `why` in the URL the picker has not followed yet (a link was opened) becomes the pick; an unknown id is said."""
    wanted = st.query_params.get(keys.WHY)
    if wanted == st.session_state.get(keys.WHY_SEEN):
        return
    st.session_state[keys.WHY_SEEN] = wanted
    if wanted in entries:
        st.session_state[keys.WHY_PICK] = wanted
    elif wanted:
        st.warning(
            f"**{md(wanted)}** (from the link) is not an entry of this knowledge base ({len(entries)} entries): pick one below.",
            icon=":material/help:",
        )


def _picked_to_url() -> None:
    """The pick goes into the URL as `why=<entry id>`, so the view can be shared (and the picker keeps it)."""
    picked = st.session_state.get(keys.WHY_PICK)
    if picked:
        st.query_params[keys.WHY] = str(picked)
    elif keys.WHY in st.query_params:
        del st.query_params[keys.WHY]
    st.session_state[keys.WHY_SEEN] = picked or None


def picker(ctx: resources.AppContext, query: str) -> None:
    """The "Why not…?" box under the results; a picked entry's trace, its chart and what it would take."""
    entries = ctx.l0.entries
    st.subheader("Why not…?")
    _follow_url(entries)
    ids = sorted(entries, key=lambda i: (entries[i].title.lower(), i))
    entry_id = st.selectbox(
        "Why not this entry?",
        ids,
        index=None,
        key=keys.WHY_PICK,
        format_func=lambda i: entry_label(entries[i]),
        placeholder=f"Pick one of the {len(ids)} entries: type part of its title or id",
        on_change=_picked_to_url,
        help="Where the entry stands for this query, stage by stage, and the first stage that put it below the top. "
        "Nothing is recorded. In the URL: why=<entry id>.",
    )
    if entry_id is None:
        st.caption(
            "Pick an entry to see why it is not (or is) the top result: its L0 match, the route, its L1 ranks and its "
            "parts in the fusion against the top result."
        )
        return
    view = _view(ctx, query, entry_id)
    trace = _trace(ctx, query, entry_id, view)
    if trace is None:
        return
    show_trace(trace)
    what_it_takes(ctx, query, trace, view)


def _view(ctx: resources.AppContext, query: str, entry_id: str) -> tuple[Any, ...]:
    s = ctx.settings
    return (query, entry_id, str(s.corpus_dir), s.collection, s.options(), ctx.conn.ok)


def _trace(ctx: resources.AppContext, query: str, entry_id: str, view: tuple[Any, ...]) -> EntryTrace | None:
    """The entry's trace, kept for this view: a rerun (a button, another widget) does not run it again."""
    last = st.session_state.get(keys.WHY_TRACE)
    if last is None or last[0] != view:
        try:
            services = ctx.lookup_services(record=False)
            with st.spinner(f"Tracing {entry_id} through the lookup…"):
                found: EntryTrace | str = explain_entry(query, entry_id, services, ctx.settings.options())
        except LookupLabError as exc:
            found = f"{type(exc).__name__}: {exc}"
        last = (view, found)
        st.session_state[keys.WHY_TRACE] = last
    if isinstance(last[1], str):
        render.error("This entry cannot be explained", last[1], "Check the sidebar status, fix what it names, and pick it again.")
        return None
    return last[1]


# --- the trace -------------------------------------------------------------------------------------------------------
def list_rank(r: ListRank | None) -> str:
    """An L1 list's place of the entry: its rank and score, past the list's depth, or not a hit at all."""
    return "–" if r is None else r.describe()


def show_trace(trace: EntryTrace) -> None:
    """The verdict sentence first, then each stage in the order the lookup runs them, then the fusion parts."""
    verdict_box(trace)
    l0_stage(trace)
    route_stage(trace)
    for name, stage in (("Vector", trace.vector), ("BM25F", trace.bm25)):
        signal_stage(name, stage)
    fusion_stage(trace)


def verdict_box(trace: EntryTrace) -> None:
    text = f"**Why not {md(trace.title)}?** {render.code(trace.entry_id)}: {md(trace.verdict)}"
    if trace.miss is None:
        st.success(text, icon=":material/check_circle:")
    else:
        st.warning(text + f"  \nCause: **{md(trace.miss.cause.label)}**", icon=":material/search_off:")


def l0_stage(trace: EntryTrace) -> None:
    l0 = trace.l0
    matched = ", ".join(f"{t.term} ({t.field})" for t in l0.matched)
    place = (
        f"rank {l0.rank} of the {l0.matched_entries} entries L0 matched (score {l0.score:.3f})"
        if l0.rank and l0.score is not None
        else f"not among the {l0.matched_entries} entries L0 matched"
    )
    lines = [f"**L0**: {md(place)}; matched terms: {md(matched) if matched else '_none of its terms_'}"]
    if l0.query_lacks:
        lines.append(f"query words the entry lacks: {md(', '.join(l0.query_lacks))}")
    if l0.entry_lacks:
        lines.append(f"its terms the query lacks: {md(', '.join(l0.entry_lacks))}")
    st.markdown("  \n".join(lines))


def route_stage(trace: EntryTrace) -> None:
    domains = ", ".join(trace.domains) or "none"
    if trace.route is None:
        route = f"unfiltered (L0 domains: {domains})"
        fits = "the filter keeps no entry out"
    elif trace.route == trace.domain:
        route = f"filtered on category = {trace.route} (L0 domains: {domains})"
        fits = f"its domain {trace.domain} is the filter's: the filter keeps it in"
    else:
        route = f"filtered on category = {trace.route} (L0 domains: {domains})"
        fits = f"its domain {trace.domain} is not the filter's: the filtered L1 lists leave it out"
    st.markdown(f"**Route**: {md(route)}; {md(fits)}. L1 {md(trace.l1_status)}.")


def signal_stage(name: str, s: SignalStage | None) -> None:
    if s is None:
        st.markdown(f"**{name}**: not searched (L1 did not run)")
        return
    cut = f"rank {s.in_lookup} of the lookup's {s.depth}" if s.in_lookup else f"not in the lookup's {s.depth}"
    line = f"**{name}**: {md(cut)}; among all entries unfiltered {md(list_rank(s.unfiltered))}"
    if s.filtered is not None:
        line += f", filtered {md(list_rank(s.filtered))}"
    if s.signal == "vector":
        if s.chunk_index is not None:
            line += f"; best chunk {s.chunk_index}"
        if s.similarity is not None:
            line += f" (similarity {s.similarity:.4f})"
    elif s.field_hits:
        line += "; field hits: " + md("; ".join(f"{f}: {' '.join(w)}" for f, w in s.field_hits))
    else:
        line += "; no query word in any of its BM25F fields"
    st.markdown(line)
    if s.signal == "vector" and s.snippet:
        st.caption(f"Best chunk: {md(' '.join(s.snippet.split())[:300])}")


def parts_rows(trace: EntryTrace) -> list[dict[str, Any]]:
    """Each signal's part of the fused score, the entry's against the top result's, and the named-in-full bonus."""
    f = trace.fusion
    rows = [
        {
            "signal": SIGNAL_LABELS.get(m.signal, m.signal),
            "rank": "–" if m.rank is None else str(m.rank),
            "this entry": round(m.value, 4),
            "top result": round(t.value, 4),
            "counted": m.counted,
        }
        for m, t in zip(f.parts, f.top_parts, strict=True)
    ]
    rows.append(
        {
            "signal": SIGNAL_LABELS["named"],
            "rank": "–",
            "this entry": round(f.named_weight * int(f.named), 4),
            "top result": round(f.named_weight * int(f.top_named), 4),
            "counted": "named" if f.named else "not named",
        }
    )
    return rows


def fusion_stage(trace: EntryTrace) -> None:
    f = trace.fusion
    score = "no fused score" if f.score is None else f"fused score {f.score:.4f}"
    top = f" against the top result {render.code(f.top)} ({f.top_score:.4f})" if f.top and f.top_score is not None else ""
    st.markdown(f"**Fusion**: {md(score)}{top}, rank {f.rank or '–'} of {f.ranked}")
    rows = parts_rows(trace)
    left, right = st.columns([1, 1])  # side by side on a desktop, one under the other on a phone
    left.table(pd.DataFrame(rows), hide_index=True)
    left.caption(
        "Each signal's scaled score times its weight (**counted**: own score, the list's bound past its depth, or zero); "
        "**rank**: the entry's rank in that signal's list."
    )
    figure = charts.fusion_parts(rows, trace.entry_id, f.top or "top result")
    right.plotly_chart(figure, width="stretch", key="why_parts_chart")


# --- what it would take ----------------------------------------------------------------------------------------------
def what_it_takes(ctx: resources.AppContext, query: str, trace: EntryTrace, view: tuple[Any, ...]) -> None:
    """The button, and once pressed the smallest changes that put the entry first and into the top k, each a link."""
    last = st.session_state.get(keys.WHY_TAKE)
    asked = st.button("What would it take?", key="why_take", help="Run the lookup under each single change (nothing recorded)")
    if asked:
        try:
            services = ctx.lookup_services(record=False)
            with st.spinner("Running the lookup under each change…"):
                found: Remedies | str = what_it_would_take(query, trace.entry_id, services, ctx.settings.options())
        except LookupLabError as exc:
            found = f"{type(exc).__name__}: {exc}"
        last = (view, found)
        st.session_state[keys.WHY_TAKE] = last
    if last is None or last[0] != view:
        st.caption(
            "What would it take: the smallest single change (the filter off, the search mode, a fusion weight, the candidate "
            "depth) that puts this entry first, and into the top k; each change is run, not predicted."
        )
        return
    if isinstance(last[1], str):
        render.error("What it would take could not be run", last[1], "Check the sidebar status and press the button again.")
        return
    show_remedies(ctx, query, last[1])


def show_remedies(ctx: resources.AppContext, query: str, r: Remedies) -> None:
    if r.rank == 1:
        st.markdown(f"**What it would take**: nothing: {md(r.entry_id)} is the top result under these settings.")
        return
    now = f"rank {r.rank}" if r.rank else "not ranked"
    st.markdown(f"**What it would take** ({len(r.tried)} changes run; now {now}): {md(r.summary())}")
    shown: list[Tried] = []
    for goal, t in (("first", r.first), (f"into the top {r.top_k}", r.into_top_k)):
        if t is not None and t not in shown:
            shown.append(t)
            remedy_link(ctx, query, r.entry_id, t, goal)
    if not shown:
        st.caption("No single change tried puts it first: look at the stages above for what it lacks.")


def href(path: str, params: Mapping[str, str]) -> str:
    """A link to a page of this app with these query parameters, relative to the app's root (Lookup is `""`). The pages'
    Markdown opens it in a new tab: a new session, whose sidebar takes every setting from the URL (a page link within
    this session would keep the sidebar's own values), while this page keeps what it shows."""
    return f"./{path}?{urlencode(params)}"


def remedy_link(ctx: resources.AppContext, query: str, entry_id: str, t: Tried, goal: str) -> None:
    """A link that opens the page with the change (in a new tab): Lookup with the setting in the URL; Filter comparison
    for the filter off (Lookup has no switch for the L0 filter)."""
    base = resources.base_settings()
    change = t.change
    said = f"{md(goal)} with {md(change.label)} (rank {t.rank})"
    if change.setting == FILTER_OFF:
        to = href("filter_comparison", urls.compare_params(query, ctx.settings, base))
        st.markdown(f":material/compare_arrows: [{said}: compare filtered and unfiltered L1 for this query]({to})")
        st.caption("Lookup has no switch for the L0 filter: Filter comparison shows this query with and without it.")
        return
    if change.setting not in REMEDY_SETTINGS:
        st.caption(f"{said}: no sidebar setting carries it.")
        return
    changed = ctx.settings.with_(**{change.setting: change.value})
    to = href("", why_params(query, changed, base, entry_id))
    st.markdown(f":material/open_in_new: [{said}: open Lookup with it]({to})")
