"""The Traffic page's parts: the window of calls (time range, session tags, collection) and the label-free estimate
(its figures with interval and calibration, the trend per day with drops marked, per tag and per domain tables)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_support import keys, time_range
from retrieval.records.dashboard import FilterOptions, InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.estimate import ESTIMATE, INTERVAL, Estimate, TrafficEstimate, calibration_words, traffic_estimate
from retrieval.traffic.features import FeatureCounts
from retrieval.traffic.reading import traffic_collections, traffic_feature_counts

RANGES: dict[str, time_range.Span] = {
    "All time": None,
    "Last 24 hours": timedelta(days=1),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
    "Custom dates": "custom",
}
ANY_COLLECTION = "(every collection)"
DROP_COLOR, DAY_COLOR = "#e45756", "#4c78a8"


def known_collections(store: InvocationStore) -> tuple[str, ...]:
    return traffic_collections(store)


def read_traffic(store: InvocationStore, flt: InvocationFilter, collection: str | None) -> tuple[TrafficEstimate, FeatureCounts]:
    """The estimate and the feature counts of the window (TrafficError names an empty window or unknown tag)."""
    return traffic_estimate(store, flt, collection), traffic_feature_counts(store, flt, collection)


def window_widgets(opts: FilterOptions, collections: Sequence[str]) -> tuple[InvocationFilter, str | None]:
    """The window of calls the estimate reads: a time range, session tags and the collection searched."""
    with st.container(border=True):
        c1, c2, c3 = st.columns([2, 3, 2])
        choice = c1.selectbox("Time range", list(RANGES), key=keys.TRAFFIC_RANGE)
        picked: Sequence[date] = ()
        if RANGES[choice] == "custom":
            today = datetime.now(UTC).date()
            first = opts.first.date() if opts.first else today
            picked = c1.date_input("From / to (UTC)", value=(first, today), key=keys.TRAFFIC_DATES)
        tags = c2.multiselect("Session tag", opts.session_tags, key=keys.TRAFFIC_SESSIONS, placeholder="every tag")
        chosen = c3.selectbox(
            "Collection", [ANY_COLLECTION, *collections], key=keys.TRAFFIC_COLLECTION, help="the corpus the calls searched"
        )
    since, until = time_range.bounds(RANGES[choice], picked)
    return InvocationFilter(since=since, until=until, session_tags=tuple(tags)), None if chosen == ANY_COLLECTION else chosen


def _figure(e: Estimate) -> str:
    return "–" if e.hit_at_1 is None else f"{e.hit_at_1:.1%}"


def estimate_section(est: TrafficEstimate) -> None:
    """The estimate overall, its calibration and interval, the trend per day, and the tables per tag and domain."""
    o = est.overall
    st.subheader("Estimated quality (label-free)")
    m1, m2, m3, m4 = st.columns(4)
    interval = "" if o.low is None else f"95% interval {o.low:.1%}–{o.high:.1%}"
    m1.metric("Estimated hit@1", _figure(o), help=f"An estimate, not a measurement. {ESTIMATE}. {INTERVAL}.")
    m2.metric("Without semantic support", f"{o.unsupported_share:.0%}", help="calls whose top result got no support claim")
    m3.metric("Fallback rate", f"{o.fallback_rate:.0%}")
    m4.metric("Calls", f"{o.calls:,}", help=f"{o.estimated_calls:,} carry a support estimate")
    st.caption(
        f"**An estimate** over {o.calls:,} calls ({est.window}){': ' + interval if interval else ''}. "
        f"Calibration: {calibration_words(est.calibration)}."
    )
    if est.per_day:
        st.plotly_chart(trend_figure(est.per_day), width="stretch")
    if est.drops:
        st.warning(f"Estimate dropped beyond its interval on {', '.join(est.drops)} (UTC).", icon=":material/trending_down:")
    t1, t2 = st.columns(2)
    t1.markdown("**Per session tag** (estimates)")
    t1.dataframe(estimate_frame(est.per_tag, "session tag"), hide_index=True, width="stretch")
    t2.markdown("**Per domain of the top result** (estimates)")
    t2.dataframe(estimate_frame(est.per_domain, "domain"), hide_index=True, width="stretch")


def estimate_frame(rows: Sequence[Estimate], key: str) -> pd.DataFrame:
    """One row per group: the estimate, its interval, the calls and the shares."""
    return pd.DataFrame(
        [
            {
                key: e.key,
                "estimated hit@1": _figure(e),
                "95% interval": "–" if e.low is None else f"{e.low:.1%}–{e.high:.1%}",
                "calls": e.calls,
                "no estimate": e.no_estimate,
                "unsupported": f"{e.unsupported_share:.0%}",
                "fallback": f"{e.fallback_rate:.0%}",
                "calibration": ", ".join(e.calibration) or "–",
            }
            for e in rows
        ],
        columns=[key, "estimated hit@1", "95% interval", "calls", "no estimate", "unsupported", "fallback", "calibration"],
    )


def trend_figure(days: Sequence[Estimate]) -> go.Figure:
    """The estimate per day with its interval; a day that dropped beyond it in red."""
    shown = [d for d in days if d.hit_at_1 is not None]
    x = [d.key for d in shown]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=[d.hit_at_1 for d in shown],
        mode="lines+markers",
        name="estimated hit@1",
        line=dict(color=DAY_COLOR),
        marker=dict(color=[DROP_COLOR if d.drop else DAY_COLOR for d in shown], size=[12 if d.drop else 7 for d in shown]),
        error_y=dict(
            type="data",
            symmetric=False,
            array=[(d.high or 0) - (d.hit_at_1 or 0) for d in shown],
            arrayminus=[(d.hit_at_1 or 0) - (d.low or 0) for d in shown],
        ),
        customdata=[[d.calls, "drop" if d.drop else ""] for d in shown],
        hovertemplate="%{x}<br>%{y:.1%} (estimate)<br>%{customdata[0]} calls %{customdata[1]}<extra></extra>",
    )
    fig.update_layout(
        title="Estimated hit@1 per day (UTC), with its interval",
        yaxis=dict(range=[0, 1.02], tickformat=".0%", title=""),
        xaxis=dict(type="category", title=""),
        height=320,
        margin=dict(l=10, r=10, t=40, b=10),
        showlegend=False,
    )
    return fig


def features_section(counts: FeatureCounts) -> None:
    """The calls' features, each bin's share, in a folded table."""
    rows = []
    for feature, bins in counts.items():
        total = sum(bins.values()) or 1
        rows += [{"feature": feature, "bin": label, "calls": n, "share": f"{n / total:.0%}"} for label, n in bins.items()]
    with st.expander("The calls' features (query length, form, routing, L0 match, fallback, support)"):
        st.dataframe(pd.DataFrame(rows, columns=["feature", "bin", "calls", "share"]), hide_index=True, width="stretch")
