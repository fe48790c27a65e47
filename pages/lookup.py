"""Lookup: the hint inspector. One query through lookup_knowledge, every stage shown."""

from __future__ import annotations

import streamlit as st

from app_support import ingest, judging, keys, lookup_view, render, resources
from app_support.render import md
from retrieval.core.lookup import MAX_QUERY_CHARS, lookup_knowledge
from retrieval.errors import LookupLabError, QueryError

ctx = resources.page_context()
settings = ctx.settings

st.title("Lookup")
st.caption(
    "One query through `lookup_knowledge`: the L0 hints, the routing decision, L1 candidates, the final "
    "results, where the time went, and the record that was stored. The query and the sidebar settings "
    "are in the URL: copy it to share this view."
)


def search_the_start() -> None:
    """The query cut to what a lookup takes; the box (and the URL) then show exactly what is searched."""
    st.session_state[keys.QUERY] = str(st.session_state.get(keys.QUERY, "")).strip()[:MAX_QUERY_CHARS]
    st.session_state[keys.RUN_LOOKUP] = True


# No max_chars on the box: the browser would drop a longer paste without a word, and a longer ?q= would be cut
# silently. A query over the limit is shown as it is, refused with a message, and never searched or recorded.
query = st.text_input(
    "Query",
    key=keys.QUERY,
    bind="query-params",
    on_change=lambda: st.session_state.update({keys.RUN_LOOKUP: True}),
    placeholder="e.g. Pod is crash looping.  /  PostgreSQL replication lag on the standby",
)
explicit = bool(st.session_state.pop(keys.RUN_LOOKUP, False))  # Enter in the box, or Run again
if not query or not query.strip():
    st.info("Type a question or an alert summary and press Enter.", icon=":material/keyboard:")
    st.stop()
if len(query.strip()) > MAX_QUERY_CHARS:
    st.warning(
        f"**The query is {len(query.strip()):,} characters long**: a lookup takes at most {MAX_QUERY_CHARS:,}, so nothing was "
        f"searched or recorded. Shorten it in the box, or search its first {MAX_QUERY_CHARS:,} characters (the box "
        "then shows exactly what is searched).",
        icon=":material/content_cut:",
    )
    st.button(f"Search the first {MAX_QUERY_CHARS:,} characters", key="lookup_cut", type="primary", on_click=search_the_start)
    st.stop()

# Before the first ingest there is nothing for L1 to search: say so, and offer the ingest here. An index that
# lost entries (a killed server) offers its repair; one still loading after a restart says so.
health = ingest.index_health(ctx) if ctx.store is not None and settings.l1_enabled else None
unindexed = health is not None and health.state == "not_indexed"
if health is not None:
    ingest.health_notice(ctx, health, key="repair_for_lookup")
if unindexed:
    ingest.show_last_result()
    st.warning(
        f"**Collection {md(settings.collection)} is not indexed yet**: L1 has nothing to search, so this "
        f"lookup answers from L0 only. Ingest the {len(ctx.corpus.entries)} entries of the corpus first.",
        icon=":material/upload:",
    )
    i1, i2 = st.columns([2, 3], vertical_alignment="center")
    if ctx.read_only:
        i1.caption(f"Ingest is off: the app is read-only ({md(ctx.access.reason)}).")
    elif i1.button(
        f"Ingest {len(ctx.corpus.entries)} entries into {settings.collection}", key="ingest_for_lookup", type="primary"
    ) and ingest.run_ingest(ctx):
        st.session_state.pop(keys.LAST_LOOKUP, None)
        st.rerun()
    i2.page_link("pages/corpus.py", label="Corpus: entries, index state, Ingest and Re-index", icon=":material/library_books:")

# Only an explicit run records an invocation. Opening the view from a URL (a refresh, a shared link, "Open in
# Lookup") or changing a setting shows the lookup without recording it; a rerun of the same view shows it again.
view = (
    query,
    str(settings.corpus_dir),
    settings.collection,
    settings.embedding_model,
    settings.top_k,
    settings.l1_enabled,
    settings.search_mode,
    settings.hybrid_alpha,
    ctx.conn.ok,
    health is not None and health.state == "loading",  # once loaded, the lookup runs again (unrecorded)
)
last = st.session_state.get(keys.LAST_LOOKUP)
if last is not None and last[0] == view and not explicit:
    result, recorded = last[1], last[2]
else:
    recorded = explicit and ctx.recorder is not None and ctx.records_lookups
    try:
        result = lookup_knowledge(query, ctx.lookup_services(record=recorded), settings.options())
    except QueryError as exc:
        render.error("Query refused", exc, "Change the query and press Enter.")
        st.stop()
    except LookupLabError as exc:
        render.error("Lookup failed", exc, "Check the sidebar status, fix what it names, and press Enter again.")
        st.stop()
    st.session_state[keys.LAST_LOOKUP] = (view, result, recorded)

b1, b2 = st.columns([1, 5], vertical_alignment="center")
b1.button(
    "Run again",
    key="lookup_run",
    help="Run the lookup again and record a new invocation.",
    on_click=lambda: st.session_state.update({keys.RUN_LOOKUP: True}),
)
if not ctx.records_lookups:
    b2.caption(
        "**Not recorded**: the app is read-only and records no lookup (LOOKUP_READ_ONLY_RECORDS=true would record the "
        "lookups typed here)."
    )
elif not recorded and ctx.recorder is not None:
    b2.caption(
        "Not recorded: this view was opened from a link or a settings change. Press Enter in the query box "
        "or **Run again** to run it as a recorded invocation."
    )

lookup_view.answer(result, settings)  # the answer first: the top result, the verdict, why each result is where it is
lookup_view.query_and_routing(result, unindexed=unindexed)
lookup_view.results(result, settings)
lookup_view.kept_out(ctx, result, settings)
judging.judge_results(
    ctx,
    query=result.query,
    found=[r.to_dict() for r in result.results],
    routed=result.l1.category,
    source=f"Lookup, invocation {result.invocation_id}" if recorded else "Lookup",
    key="judge_lookup",
)
lookup_view.hint_panels(result.l0)
lookup_view.l1_candidates(result)
lookup_view.timings_and_record(ctx, result, recorded=recorded)
