"""Invocations: the DuckDB store of every lookup_knowledge call: filters, charts, details, export, read-only SQL."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import streamlit as st

from app_support import call_view, charts, keys, render, replay_ui, resources, sql_ui, time_range
from retrieval.errors import LookupLabError
from retrieval.records.dashboard import (
    SAMPLE_CALLS,
    SAMPLE_VECTORS,
    InvocationFilter,
    export_frame,
    filter_options,
    load_dashboard,
)
from retrieval.records.invocations import InvocationStore

RANGES: dict[str, time_range.Span] = {
    "All time": None,
    "Last hour": timedelta(hours=1),
    "Last 24 hours": timedelta(days=1),
    "Last 7 days": timedelta(days=7),
    "Custom dates": "custom",
}
ROW_LIMIT = 500
LIVE_REFRESH_S = 2  # what "follow live traffic" waits between reloads (the store flushes every second)

ctx = resources.page_context()
recorder = ctx.recorder

st.title("Invocations")
st.caption("Every `lookup_knowledge` call, as stored in the `tool_invocation` table of the DuckDB invocation store.")
if recorder is None:
    render.error(
        "The invocation store is not available",
        ctx.recorder_error or "unknown reason",
        "Check LOOKUP_DB_PATH / LOOKUP_DATA_DIR (a writable folder), then reload.",
    )
    st.stop()
store: InvocationStore = recorder


def time_window(choice: str) -> tuple[datetime | None, datetime | None]:
    return time_range.bounds(RANGES[choice], st.session_state.get(keys.INV_DATES) or ())


def dashboard_section() -> None:
    with store.reading():  # the page's queries over one connection: each open costs 30-60 ms
        shown = dashboard_frames()
    if shown is not None:
        replay_ui.replay_section(ctx, *shown)


def dashboard_frames() -> tuple[InvocationFilter, int] | None:
    """Filters, figures, charts and the table of calls; the filter and its count for the replay section."""
    try:
        opts = filter_options(store)
    except LookupLabError as exc:
        render.error("The invocation store cannot be read", exc, "Another process may hold it; reload in a moment.")
        return None
    if opts.total == 0:
        st.info(
            "No invocations recorded yet: run a query on the Lookup page (or `python -m retrieval lookup`).",
            icon=":material/inbox:",
        )
        return None
    flt = filters(opts)
    try:
        dash = load_dashboard(store, flt, row_limit=ROW_LIMIT)
    except LookupLabError as exc:
        render.error("The invocation store cannot be read", exc, "Another process may hold it; reload in a moment.")
        return None
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Calls", f"{dash.total:,}", help=f"of {opts.total:,} stored")
    m2.metric("Fallbacks", f"{dash.fallbacks:,}")
    m3.metric("Fallback rate", "–" if dash.fallback_rate is None else f"{dash.fallback_rate:.0%}")
    approx = " (≈)" if dash.quantiles_approximate else ""
    m4.metric("Median latency" + approx, "–" if dash.median_latency_ms is None else f"{dash.median_latency_ms:.0f} ms")
    if dash.total == 0:
        st.info("No invocation matches these filters: widen them.", icon=":material/filter_alt_off:")
        return None
    dashboard_charts(dash)
    calls_table(dash, flt)
    return flt, dash.total


def filters(opts) -> InvocationFilter:
    """The filter boxes, as one InvocationFilter."""
    with st.container(border=True):
        st.markdown("**Filters**")
        f1, f2, f3 = st.columns([2, 3, 2])
        choice = f1.selectbox("Time range", list(RANGES), key=keys.INV_RANGE)
        if RANGES[choice] == "custom":
            today = datetime.now(UTC).date()
            first = opts.first.date() if opts.first else today
            f1.date_input("From / to (UTC)", value=(first, today), key=keys.INV_DATES)
        text = f2.text_input("Text in the query", key=keys.INV_TEXT, placeholder="substring, case-insensitive")
        fallback_only = f3.checkbox(
            "Fallback only", key=keys.INV_FALLBACK, help="L0 matched but L1 did not answer (failed, empty or unavailable)."
        )
        g1, g2, g3, g4 = st.columns(4)
        layers = g1.multiselect("Layer", opts.layers, key=keys.INV_LAYERS)
        domains = g2.multiselect("Domain", opts.domains, key=keys.INV_DOMAINS)
        statuses = g3.multiselect("Status", opts.statuses, key=keys.INV_STATUSES)
        sessions = g4.multiselect("Session tag", opts.session_tags, key=keys.INV_SESSIONS)
    since, until = time_window(choice)
    return InvocationFilter(
        since=since,
        until=until,
        layers=tuple(layers),
        domains=tuple(domains),
        statuses=tuple(statuses),
        session_tags=tuple(sessions),
        fallback_only=fallback_only,
        text=text,
    )


def dashboard_charts(dash) -> None:
    """Calls over time, the stages' latency, the fallback rate, the top domains and L0 keywords."""
    approx = dash.quantiles_approximate
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.calls_over_time(dash.calls_over_time, dash.bucket), width="stretch")
    if dash.stage_samples.empty:
        c2.caption("No per-stage timings in these rows.")
    else:
        c2.plotly_chart(charts.stage_latency(dash.stage_samples), width="stretch")
        if dash.total > SAMPLE_CALLS:
            c2.caption(
                f"Boxes drawn from {SAMPLE_CALLS:,} calls picked at random"
                + (f" within about {SAMPLE_VECTORS} random runs of 2,048 consecutive calls" if approx else "")
                + f"; the p50/p95 table below counts all {dash.total:,}."
                + (" Quantiles approximate (within 0.5%), from the store's latency histogram." if approx else "")
            )
            c2.dataframe(dash.stage_latency, hide_index=True, width="stretch")
    c3, c4, c5 = st.columns(3)
    c3.plotly_chart(charts.fallback_rate(dash.fallback_over_time, dash.bucket), width="stretch")
    domains_chart(c4, dash)
    hidden = dash.hidden_keywords
    single = bool(hidden) and c5.toggle(
        "Single title words too",
        key=keys.INV_SINGLE_WORDS,
        help="L0 also matches single words of titles and file names (" + ", ".join(hidden[:5]) + "): frequent, and "
        "telling little on their own. Stop words are never shown.",
    )
    top_keywords = dash.top_keywords if single else dash.telling_keywords
    if top_keywords.empty:
        c5.caption("No L0 keywords matched in these rows." if dash.top_keywords.empty else "Only single title words matched.")
    else:
        c5.plotly_chart(charts.top_counts(top_keywords, "keyword", "Top L0 keywords", color="field"), width="stretch")


def domains_chart(col, dash) -> None:
    """The domains the calls were routed to; the calls routed to none counted beside the chart, not in it."""
    if dash.top_domains.empty:
        col.caption("No call in these rows was routed to a domain.")
    else:
        col.plotly_chart(charts.top_counts(dash.top_domains, "domain", "Top domains"), width="stretch")
    if dash.unrouted:
        calls = f"{dash.unrouted:,} call{'' if dash.unrouted == 1 else 's'}"
        col.caption(f"Not charted: {calls} routed to no domain (L0 named none, or several), so L1 searched unfiltered.")


CALL_COLUMNS = {
    "latency_ms": st.column_config.NumberColumn("latency (ms)", format="%.1f"),
    "created_at": st.column_config.DatetimeColumn("time", format="YYYY-MM-DD HH:mm:ss"),
    "input": st.column_config.TextColumn("query", width="large"),
    "top_entry_id": st.column_config.TextColumn("top entry"),
}


def calls_table(dash, flt: InvocationFilter) -> None:
    """The calls, newest first, one selectable to see its results; CSV and Parquet exports of every call that matches."""
    st.markdown(
        f"**Calls** (newest first{', first ' + str(ROW_LIMIT) if dash.total > ROW_LIMIT else ''}): "
        "select a row to see its results and relevance"
    )
    event = st.dataframe(
        dash.rows, hide_index=True, on_select="rerun", selection_mode="single-row", key=keys.INV_TABLE, column_config=CALL_COLUMNS
    )
    rows = event.selection.rows if event is not None else []
    if rows:
        call_view.show_call(ctx, store, dash.rows.iloc[rows[0]])
    d1, d2, _ = st.columns([1.3, 1.6, 3])  # wide enough for "Download Parquet" on a 1280 px screen
    d1.download_button(
        "Download CSV",
        data=lambda: export_frame(store, flt).to_csv(index=False).encode("utf-8"),
        file_name="tool_invocation.csv",
        mime="text/csv",
        on_click="ignore",
        key="dl_csv",
    )

    def parquet() -> bytes:
        buf = io.BytesIO()
        export_frame(store, flt).to_parquet(buf, index=False)
        return buf.getvalue()

    d2.download_button(
        "Download Parquet",
        data=parquet,
        file_name="tool_invocation.parquet",
        mime="application/vnd.apache.parquet",
        on_click="ignore",
        key="dl_parquet",
    )


live = st.toggle(
    "Follow live traffic",
    key=keys.INV_LIVE,
    help=f"Reload the calls every {LIVE_REFRESH_S} s, e.g. while agents call `python -m retrieval serve`.",
)
st.fragment(run_every=LIVE_REFRESH_S if live else None)(dashboard_section)()
st.divider()
sql_ui.sql_console(store)
