"""Traffic: what quality the recorded calls are likely getting, estimated without labels, over a window of calls."""

from __future__ import annotations

import streamlit as st

from app_support import render, resources, traffic_mix_view, traffic_queue_view, traffic_view
from retrieval.errors import LookupLabError, TrafficError
from retrieval.records.dashboard import filter_options
from retrieval.records.invocations import InvocationStore

ctx = resources.page_context()
st.title("Traffic")
st.caption(
    "The recorded `lookup_knowledge` calls as an eval set without labels: the mean support estimate is an estimate of "
    "hit@1 on traffic nobody judged. Nothing here writes."
)
if ctx.recorder is None:
    render.error(
        "The invocation store is not available",
        ctx.recorder_error or "unknown reason",
        "Check LOOKUP_DB_PATH / LOOKUP_DATA_DIR (a writable folder), then reload.",
    )
    st.stop()
store: InvocationStore = ctx.recorder

with store.reading():  # the page's queries over one connection
    try:
        opts = filter_options(store)
        collections = traffic_view.known_collections(store) if opts.total else ()
    except LookupLabError as exc:
        render.error("The invocation store cannot be read", exc, "Another process may hold it; reload in a moment.")
        st.stop()
    if opts.total == 0:
        st.info(
            "No calls recorded yet: run a query on the Lookup page (or `python -m retrieval lookup`).", icon=":material/inbox:"
        )
        st.stop()
    flt, collection = traffic_view.window_widgets(opts, collections)
    try:
        estimate, counts = traffic_view.read_traffic(store, flt, collection)
    except TrafficError as exc:
        st.info(f"{exc}: widen the time range or pick other tags.", icon=":material/filter_alt_off:")
        st.stop()
    except LookupLabError as exc:
        render.error("The invocation store cannot be read", exc, "Another process may hold it; reload in a moment.")
        st.stop()

traffic_view.estimate_section(estimate)
traffic_view.features_section(counts)
traffic_mix_view.beside_eval_sets(ctx, counts)
traffic_queue_view.queue_section(ctx, flt)
