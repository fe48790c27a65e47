"""Filter comparison: L1 with the L0-derived category filter beside L1 without it, for one query or an eval set."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from app_support import charts, eval_ui, jobs, keys, resources, urls
from app_support.render import md
from retrieval.evals.comparison import COMPARED_QUERIES, compare_filter, compare_filter_on_set, query_meaning
from retrieval.evals.routing_metrics import HURT_MEANING, VERDICTS
from retrieval.evals.sets import EvalCase, EvalSet
from retrieval.types.modes import LookupMode

ctx = resources.page_context()
settings = ctx.settings

st.title("Filter comparison")
st.caption(
    "What the L0-derived category filter does to L1: the same query vector searched with the filter "
    "and without it. Runs nothing into the invocation store."
)
kind = (
    st.segmented_control(
        "L1 query compared", COMPARED_QUERIES, default="near_vector", required=True, key=keys.COMPARE_KIND, bind="query-params"
    )
    or "near_vector"
)
st.caption(f"**{md(kind)}**: {md(query_meaning(kind, settings))}. Evaluate's `l1_filtered` and `l1_unfiltered` are near_vector.")


def candidates_table(cands) -> pd.DataFrame:
    """One side's candidates: rank, entry (its id starts with its domain), distance, score."""
    return pd.DataFrame(
        [
            {
                "rank": i,
                "entry_id": c.entry_id,
                "distance": None if c.distance is None else round(c.distance, 4),
                "score": round(c.score, 4),
            }
            for i, c in enumerate(cands, 1)
        ],
        columns=["rank", "entry_id", "distance", "score"],
    )


# Narrow columns, so that both tables side by side show every column at 1280 px: with the sidebar open each table is
# about 400 px wide, and a domain column took the 55 px the score lacked (the entry id names the domain already)
CANDIDATE_COLUMNS = {
    "rank": st.column_config.NumberColumn("#", width=36),
    "entry_id": st.column_config.TextColumn("entry", width="medium"),
    "distance": st.column_config.NumberColumn(width=68, format="%.4f"),
    "score": st.column_config.NumberColumn(width=68, format="%.4f"),
}


def one_query() -> None:
    st.subheader("One query")
    query = st.text_input(
        "Query to compare", key=keys.COMPARE_QUERY, bind="query-params", placeholder="e.g. Pod keeps restarting"
    )
    if not query or not query.strip():
        st.caption("Type a query and press Enter.")
        return
    cmp = jobs.run_job(
        "The comparison failed",
        lambda _: compare_filter(query.strip(), ctx.lookup_services(record=False), settings, kind),
        fix="Check the sidebar status (Weaviate, collection) and try again.",
        when_down="Check that Weaviate is up (Retry connection) and that the collection is ingested.",
        start="comparing…",
    )
    if cmp is None:
        return
    st.info(f"**Routing:** {md(cmp.routing)}", icon=":material/alt_route:")
    if cmp.category is None:
        st.caption(
            "The filter does not apply to this query (zero or several L0 domains): both sides are the same unfiltered search."
        )
    m1, m2, m3 = st.columns(3)
    m1.metric("Overlap", f"{len(cmp.overlap)} of {len(cmp.unfiltered)}")
    m2.metric("Removed by the filter", len(cmp.removed))
    m3.metric("Let in by the filter", len(cmp.let_in))
    rows = cmp.rank_shifts()
    if rows:
        st.plotly_chart(charts.rank_shifts(rows, settings.top_k), width="stretch")
    left, right = st.columns(2)
    with left:
        label = f"category = {cmp.category}" if cmp.category else "not applied"
        st.markdown(f"**Filtered** ({md(label)})")
        st.dataframe(candidates_table(cmp.filtered), hide_index=True, column_config=CANDIDATE_COLUMNS, width="stretch")
    with right:
        st.markdown("**Unfiltered**")
        st.dataframe(candidates_table(cmp.unfiltered), hide_index=True, column_config=CANDIDATE_COLUMNS, width="stretch")
    if cmp.removed:
        st.markdown("**Removed** (in the unfiltered top-k, kept out by the filter): " + ", ".join(md(e) for e in cmp.removed))
    if cmp.let_in:
        st.markdown(
            "**Let in** (in the filtered top-k only; the filter made room for them): " + ", ".join(md(e) for e in cmp.let_in)
        )


def answerable_set() -> tuple[EvalSet, list[EvalCase], str] | None:
    """The picked eval set, its answerable cases and its label, or None with a message."""
    picked = eval_ui.pick_fitting_set(ctx, key=keys.EVAL_SET)
    if picked is None:
        return None
    eval_set, path = picked
    cases = [c for c in eval_set.cases if c.answerable]
    if not cases:
        st.info(
            f"**{md(eval_set.name)}** has no answerable cases (every case expects nothing), so there is no "
            "reciprocal rank to compare. Pick another eval set."
        )
        return None
    return eval_set, cases, eval_ui.eval_set_label(path)


def eval_set_section() -> None:
    st.subheader("Eval set")
    picked = answerable_set()
    if picked is None:
        return
    eval_set, cases, label = picked
    eval_ui.offer_ingest(ctx, key="ingest_for_eval")
    view = eval_ui.run_view(settings, label=f"{label} ({kind})")
    if st.button(f"Compare on {len(cases)} cases", type="primary", key="run_set_comparison"):
        deltas = jobs.run_job(
            "The comparison stopped",
            lambda bar: compare_filter_on_set(
                eval_set, ctx.lookup_services(record=False), settings, progress=bar.counts, kind=kind
            ),
            fix="Check the sidebar status and press the button again.",
            when_down="Check that Weaviate is up (Retry connection) and press the button again.",
            unit="cases",
            start="comparing…",
        )
        if deltas is None:
            return
        st.session_state[keys.SET_COMPARISON] = (view, deltas)
    stored = st.session_state.get(keys.SET_COMPARISON)
    if stored is None:
        return
    eval_ui.settings_changed(stored[0], view)  # the last comparison stays on screen, marked, until the next one
    show_set_comparison(pd.DataFrame([d.to_dict() for d in stored[1]]))


def show_set_comparison(frame: pd.DataFrame) -> None:
    """The verdict counts, the MRR either side, the changed cases' chart, the hurt cases and the whole table."""
    counts = Counter(frame["verdict"])
    cols = st.columns(6)
    for col, verdict in zip(cols, VERDICTS, strict=False):  # six columns, four verdicts
        col.metric(verdict.capitalize(), counts.get(verdict, 0))
    cols[4].metric("MRR unfiltered", f"{frame['rr_unfiltered'].mean():.3f}")
    change = frame["rr_filtered"].mean() - frame["rr_unfiltered"].mean()
    cols[5].metric(
        "MRR filtered",
        f"{frame['rr_filtered'].mean():.3f}",
        delta=f"{change:+.3f}" if round(change, 3) != 0 else None,  # no arrow for no change
    )
    changed = int((frame["delta_rr"] != 0).sum())
    if changed:
        st.plotly_chart(charts.delta_rr(frame), width="stretch")
    st.caption(
        f"The filter changed the reciprocal rank (over the top 10, as the eval's mrr@10) of {changed} of "
        f"{len(frame)} cases; only those are drawn."
    )
    hurt = frame[frame["verdict"] == "hurt"]
    st.markdown(f"**Cases the filter hurt** ({len(hurt)}): {md(HURT_MEANING)}. Open one in Lookup:")
    # Lookup in the mode compared here (BM25 alone is no lookup mode: the sidebar's then)
    shown = settings.with_(search_mode=kind) if kind in {str(m) for m in LookupMode} else settings
    for row in hurt.itertuples():
        st.page_link(
            "pages/lookup.py",
            label=f"{md(row.case_id)}: {md(row.query)}  (RR {row.rr_unfiltered:.2f} → "
            f"{row.rr_filtered:.2f}, filter {md(row.category)})",
            icon=":material/open_in_new:",
            query_params=urls.lookup_params(str(row.query), shown, resources.base_settings()),
        )
    if hurt.empty:
        st.caption("none")
    with st.expander(f"All {len(frame)} cases"):
        st.dataframe(
            frame,
            hide_index=True,
            column_config={
                "delta_rr": st.column_config.NumberColumn("Δ RR", format="%+.3f"),
                "rr_unfiltered": st.column_config.NumberColumn(format="%.3f"),
                "rr_filtered": st.column_config.NumberColumn(format="%.3f"),
            },
        )


if not settings.l1_enabled:
    st.info("L1 is switched off in the sidebar: switch it on to compare filtered and unfiltered L1.")
elif ctx.store is None:
    st.warning("The comparison needs L1, which is unavailable (see the banner above). L0 alone cannot be compared.")
else:
    one_query()
    st.divider()
    eval_set_section()
