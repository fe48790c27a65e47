"""The read-only SQL console of the Invocations page."""

from __future__ import annotations

import streamlit as st

from retrieval.errors import LookupLabError, SqlRefused
from retrieval.records.invocations import InvocationStore
from retrieval.records.sql_console import EXAMPLES, run_readonly

from . import keys, render
from .render import md


def set_example() -> None:
    """Put the picked example query in the SQL box."""
    name = st.session_state.get(keys.SQL_EXAMPLE)
    if name in EXAMPLES:
        st.session_state[keys.SQL_TEXT] = EXAMPLES[name]


def sql_console(store: InvocationStore) -> None:
    """A read-only SQL box over the invocation store, with examples, a row limit and a time limit."""
    st.subheader("Read-only SQL")
    st.caption(
        "One SELECT (or EXPLAIN of one) over `tool_invocation`, on a read-only connection with file and "
        "network access off. Anything else is refused."
    )
    st.selectbox("Example queries", ["(pick one)", *EXAMPLES], key=keys.SQL_EXAMPLE, on_change=set_example)
    if keys.SQL_TEXT not in st.session_state:
        st.session_state[keys.SQL_TEXT] = next(iter(EXAMPLES.values()))
    sql = st.text_area("SQL", key=keys.SQL_TEXT, height=110)
    a, b, _ = st.columns([1, 1, 2])
    row_limit = a.number_input("Row limit", min_value=1, max_value=100_000, value=1_000, step=100, key=keys.SQL_ROWS)
    timeout_ms = b.number_input("Time limit (ms)", min_value=100, max_value=60_000, value=5_000, step=500, key=keys.SQL_TIMEOUT)
    if not st.button("Run query", type="primary", key=keys.SQL_RUN):
        return
    try:
        out = run_readonly(store, sql, row_limit=int(row_limit), timeout_ms=int(timeout_ms))
    except SqlRefused as exc:
        st.error(f"**Refused**: {md(exc)}", icon=":material/block:")
        return
    except LookupLabError as exc:
        render.error("The query could not run", exc, "The store may be busy: press Run query again in a moment.")
        return
    more = f"; stopped at the row limit of {int(row_limit):,}" if out.truncated else ""
    st.caption(f"{len(out.frame):,} rows in {out.elapsed_ms:.0f} ms{md(more)}")
    st.dataframe(out.frame, hide_index=True)
