"""The judging queue on the Traffic page: the calls of the window to judge next (retrieval.traffic.queue picks them),
one selected to judge with the Judge flow of Lookup and Invocations, which writes to the judgments folder."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.errors import LookupLabError
from retrieval.records.dashboard import InvocationFilter, result_for
from retrieval.traffic.queue import DEFAULT_TARGET, LEAST_SURE, NO_DOMAIN, STRATEGIES, Queue, build_queue, judged_queries

from . import judging, keys, render, resources
from .render import md

SEED = "queue_seed"
FORGET = "queue_forget_first"
HELP = {
    "least sure": "the lowest support estimate first: the calls whose top result the tool believes least",
    "nearest the threshold": "the support estimate nearest its threshold first: where the claim could go either way",
    "stratified": "one call of each top domain × query form in turn, at random within each",
    "random": "at random (the seed repeats an order)",
}
COLUMNS = ["query", "why", "support", "top entry", "domain", "form", "calls", "session tag", "recorded at", "invocation"]


def queue_section(ctx: resources.AppContext, flt: InvocationFilter) -> None:
    """Strategy, target count, the queue as a table; a selected call judged (not offered in read-only mode)."""
    store = ctx.recorder
    if store is None:
        return
    st.subheader("Which calls to judge next")
    a, b, c = st.columns([2, 1, 1], vertical_alignment="bottom")
    strategy = a.selectbox("Strategy", STRATEGIES, index=STRATEGIES.index(LEAST_SURE), key=keys.QUEUE_STRATEGY)
    target = int(b.number_input("Calls to queue", min_value=1, max_value=500, value=DEFAULT_TARGET, key=keys.QUEUE_TARGET))
    seed = int(c.number_input("Seed", min_value=0, value=0, key=SEED, disabled=strategy not in ("random", "stratified")))
    st.caption(f"{md(strategy.capitalize())}: {HELP[strategy]}. Near-duplicate queries count once (the newest call).")
    first = tuple(st.session_state.get(keys.QUEUE_FIRST) or ())
    try:
        judged = judged_queries(ctx.settings.judged_sets_dir)
        queue = build_queue(store, flt, strategy=strategy, target=target, judged=judged, seed=seed, first=first)
    except LookupLabError as exc:
        render.error("The judging queue cannot be built", exc, "Widen the window, or pick another strategy.")
        return
    if first and st.button(f"Forget the {len(first)} calls the replay queued first", key=FORGET):
        st.session_state[keys.QUEUE_FIRST] = ()
        st.rerun()
    picked = queue_table(queue)
    if picked is not None:
        judge_call(ctx, store, picked)


def queue_table(queue: Queue) -> pd.Series | None:
    """The queue, in order, with what it left out; the selected row, if any."""
    st.caption(
        f"{len(queue.calls):,} of up to {queue.target:,} calls from {queue.window_calls:,} in the window: "
        f"{queue.collapsed:,} repeated a query or a near-duplicate, {queue.judged:,} asked a query judged already."
    )
    if not queue.calls:
        st.info("Every call of this window is judged already.", icon=":material/done_all:")
        return None
    frame = pd.DataFrame(
        [
            {
                "query": c.query,
                "why": c.why,
                "support": c.support,
                "top entry": c.top_entry_id,
                "domain": c.domain,
                "form": c.form,
                "calls": c.calls,
                "session tag": c.session_tag,
                "recorded at": c.created_at,
                "invocation": c.invocation_id,
            }
            for c in queue.calls
        ],
        columns=COLUMNS,
    )
    event = st.dataframe(
        frame,
        hide_index=True,
        on_select="rerun",
        selection_mode="single-row",
        key=keys.QUEUE_TABLE,
        column_config={
            "support": st.column_config.NumberColumn(format="%.2f"),
            "query": st.column_config.TextColumn(width="large"),
        },
    )
    rows = event.selection.rows if event is not None else []
    return frame.iloc[rows[0]] if rows and rows[0] < len(frame) else None


def judge_call(ctx: resources.AppContext, store, picked: pd.Series) -> None:
    """The selected call's results, and the Judge expander (off in read-only mode)."""
    st.markdown(f"**Call {md(picked['invocation'])}**: {md(picked['query'])}")
    if ctx.read_only:
        st.caption(f"Judging is off: the app is read-only ({md(ctx.access.reason)}), and judging writes eval set files.")
        return
    found = (result_for(store, str(picked["invocation"])) or {}).get("results") or []
    if found:
        st.dataframe(
            pd.DataFrame(
                [{"rank": i, **{k: r.get(k) for k in ("entry_id", "title", "domain", "score")}} for i, r in enumerate(found, 1)]
            ),
            hide_index=True,
        )
    else:
        st.caption("This call returned no results.")
    domain = None if picked["domain"] == NO_DOMAIN else str(picked["domain"])
    judging.judge_results(
        ctx,
        query=str(picked["query"]),
        found=found,
        routed=domain,
        source=f"invocation {picked['invocation']}",
        key="judge_queue",
        invocation=str(picked["invocation"]),
    )
