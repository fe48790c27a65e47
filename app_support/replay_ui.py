"""Replay on the Invocations page: the calls its filters match, rerun under the sidebar settings
(retrieval.lab.replay does the work; nothing is recorded unless the checkbox asks)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.lab.rank_overlap import RBO_P
from retrieval.lab.replay import REPLAY_TAG, ReplayReport, recorded_calls, replay, settings_summary
from retrieval.records.dashboard import InvocationFilter

from . import keys, resources
from .jobs import JobBar, run_job
from .render import md

LIMIT = "replay_limit"
RECORD = "replay_record"
TAG = "replay_tag"
RUN = "replay_run"
REPORT = "_replay_report"  # (filter, ReplayReport) of the last replay
QUEUE_MOVED = "replay_queue_moved"
MOVED = 20  # the calls that moved most, queued for judging by one button
OUTCOME_LABEL = {"changed": "changed", "unchanged": "unchanged", "now_empty": "now empty", "failed": "failed"}
TABLE_COLUMNS = [
    "outcome",
    "query",
    "top before",
    "top after",
    "overlap@k",
    "RBO",
    "support before",
    "support after",
    "Δ support",
    "domain",
    "recorded at",
    "invocation",
]


def replay_section(ctx: resources.AppContext, flt: InvocationFilter, matching: int) -> None:
    """An expander: how many of the `matching` calls to replay, whether to record, the button and the report."""
    store = ctx.recorder
    if store is None:
        return
    with st.expander("Replay these calls under the current settings", icon=":material/replay:"):
        st.caption(
            "Reruns the queries of the calls the filters above match (newest first) with the sidebar settings and "
            "compares each top result with the recorded one. Nothing is recorded unless you tick the box."
        )
        a, b, c = st.columns([1, 1, 2], vertical_alignment="bottom")
        limit = a.number_input("Calls to replay", min_value=1, max_value=5000, value=min(max(matching, 1), 200), key=LIMIT)
        record = b.checkbox("Record the replayed calls", key=RECORD, disabled=ctx.read_only) and not ctx.read_only
        if ctx.read_only:
            st.caption(f"Recording is off: the app is read-only ({md(ctx.access.reason)}); the replay writes nothing.")
        tag = c.text_input("Session tag of the recorded replays", value=REPLAY_TAG, key=TAG, disabled=not record)
        if st.button(f"Replay {min(int(limit), matching):,} calls", key=RUN, type="primary"):

            def work(bar: JobBar) -> ReplayReport:
                calls, matched = recorded_calls(store, flt, limit=int(limit))
                services = ctx.lookup_services(record=False)
                recorder = store if record else None
                session = tag.strip() or REPLAY_TAG
                return replay(
                    calls, services, ctx.settings, recorder=recorder, session_tag=session, matched=matched, progress=bar.counts
                )

            report = run_job(
                "The replay stopped",
                work,
                fix="Check the sidebar status and replay again.",
                when_down="Check that Weaviate is up (Retry connection) and replay again.",
                unit="queries",
                start="replaying…",
            )
            if report is None:
                return
            st.session_state[REPORT] = (flt, report)
        last = st.session_state.get(REPORT)
        if last is not None:
            show_report(*last, flt=flt, settings=settings_summary(ctx.settings))


def show_report(used: InvocationFilter, report: ReplayReport, *, flt: InvocationFilter, settings: dict) -> None:
    if used != flt or report.settings != settings:
        st.caption("The filters or the settings changed since this replay: replay again to compare under the new ones.")
    t, f = report.totals, report.figures
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Changed", f"{t['changed']:,}", help="the top result is another entry now")
    m2.metric("Unchanged", f"{t['unchanged']:,}", help=f"the same top result; {t['same_results']:,} with the same whole list")
    m3.metric("Now empty", f"{t['now_empty']:,}", help="results then, none now")
    m4.metric("Failed", f"{t['failed']:,}")
    n1, n2, n3 = st.columns(3)
    n1.metric("Mean overlap@k", _num(f["overlap_at_k"]), help="the share of the results both lists hold (k: the longer)")
    n2.metric("Mean RBO", _num(f["rbo"]), help=f"rank-biased overlap (RBO_ext, p = {RBO_P}): 1 the same ranking, 0 none shared")
    n3.metric(
        "Mean support change",
        _num(f["support_change"], signed=True),
        help=f"the support estimate after less before, over {f['support_compared']:,} calls with an estimate both times",
    )
    more = f" of {report.matched:,} matching" if report.matched > t["calls"] else ""
    recorded = f"recorded with session tag {md(report.session_tag)}" if report.recorded else "nothing recorded"
    st.caption(f"{t['calls']:,} calls{more}, {report.lookups:,} distinct queries; {recorded}.")
    st.markdown("**By the domain of the recorded top result**")
    st.dataframe(domain_frame(report), hide_index=True, key="replay_domains")
    st.markdown("**The calls, those that moved most first**")
    st.dataframe(calls_frame(report), hide_index=True, key="replay_table")
    queue_moved(report)


def _num(x: float | None, *, signed: bool = False) -> str:
    return "–" if x is None else f"{x:+.2f}" if signed else f"{x:.2f}"


def domain_frame(report: ReplayReport) -> pd.DataFrame:
    rows = [
        {
            "domain": d,
            "calls": v["calls"],
            "top changed": v["changed"],
            "overlap@k": v["overlap_at_k"],
            "RBO": v["rbo"],
            "Δ support": v["support_change"],
        }
        for d, v in report.by_domain.items()
    ]
    return pd.DataFrame(rows, columns=["domain", "calls", "top changed", "overlap@k", "RBO", "Δ support"])


def calls_frame(report: ReplayReport) -> pd.DataFrame:
    rows = [
        {
            "outcome": OUTCOME_LABEL[c.outcome],
            "query": c.call.query,
            "top before": c.before_top,
            "top after": c.after_top,
            "overlap@k": c.overlap,
            "RBO": c.rbo,
            "support before": c.call.support,
            "support after": c.support_after,
            "Δ support": c.support_change,
            "domain": c.call.domain,
            "recorded at": c.call.created_at,
            "invocation": c.call.invocation_id,
        }
        for c in report.moved_most()
    ]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def queue_moved(report: ReplayReport) -> None:
    """One button: the calls that moved most go first in the judging queue (keys.QUEUE_FIRST)."""
    moved = [c.call.invocation_id for c in report.moved_most() if c.outcome != "failed" and c.movement > (0.0, 0.0)]
    if not moved:
        st.caption("No call moved: nothing to queue for judging.")
        return
    n = min(len(moved), MOVED)
    if st.button(f"Queue the {n} calls that moved most for judging", key=QUEUE_MOVED, icon=":material/playlist_add:"):
        st.session_state[keys.QUEUE_FIRST] = tuple(moved[:n])
    if st.session_state.get(keys.QUEUE_FIRST):
        st.caption(
            f"{len(st.session_state[keys.QUEUE_FIRST])} calls wait first in the judging queue (the Traffic page) in this session."
        )
