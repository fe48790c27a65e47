"""One recorded call on the Invocations page: its results and relevance as returned, judging, and its details."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.records.dashboard import details_for, result_for
from retrieval.records.invocations import InvocationStore

from . import judging, keys, resources
from .render import md


def show_call(ctx: resources.AppContext, store: InvocationStore, picked: pd.Series) -> None:
    """One recorded call: its results and relevance as returned, a link that reopens it in Lookup, and its
    retrieval_details."""
    result = result_for(store, picked["id"]) or {}
    st.markdown(f"**Call {md(picked['id'])}**: {md(picked['input'])}")
    relevance = result.get("relevance") or {}
    if relevance:
        show = {"high": st.success, "medium": st.info}.get(relevance.get("level") or "", st.warning)
        show(
            f"**Relevance: {md(relevance.get('level'))}** (semantic support: "
            f"{'yes' if relevance.get('semantic_support') else 'no'}). {md(relevance.get('reason', ''))}"
        )
    found = result.get("results") or []
    if found and relevance and not relevance.get("semantic_support"):
        st.markdown("**No supported answer in the knowledge base**: the entries below are the nearest, not answers.")
    if found:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "rank": i,
                        "entry_id": r.get("entry_id"),
                        "title": r.get("title"),
                        "domain": r.get("domain"),
                        "source": r.get("source"),
                        "score": r.get("score"),
                    }
                    for i, r in enumerate(found, 1)
                ]
            ),
            hide_index=True,
            column_config={"score": st.column_config.NumberColumn(format="%.3f")},
        )
    else:
        st.caption("This call returned no results.")
    judging.judge_results(
        ctx,
        query=str(picked["input"]),
        found=found,
        routed=None if pd.isna(picked["domain"]) else str(picked["domain"]),
        source=f"invocation {picked['id']}",
        key="judge_call",
        invocation=str(picked["id"]),
    )
    st.page_link(
        "pages/lookup.py",
        label="Open in Lookup (shown there without recording it again)",
        icon=":material/open_in_new:",
        query_params={keys.QUERY: str(picked["input"])},
    )
    with st.expander(f"retrieval_details of {picked['id']}"):
        st.json(details_for(store, picked["id"]) or {}, expanded=2)
