"""Lookup: the hint inspector. One query through lookup_knowledge, every stage shown."""

from __future__ import annotations

import streamlit as st

from app_support import ingest, judging, keys, lookup_view, render, resources, why_not_view
from app_support.ingest import IndexHealth
from app_support.render import md
from retrieval.core.lookup import MAX_QUERY_CHARS, LookupResult, lookup_knowledge
from retrieval.errors import LookupLabError, QueryError


def search_the_start() -> None:
    """The query cut to what a lookup takes; the box (and the URL) then show exactly what is searched."""
    st.session_state[keys.QUERY] = str(st.session_state.get(keys.QUERY, "")).strip()[:MAX_QUERY_CHARS]
    st.session_state[keys.RUN_LOOKUP] = True


def read_query() -> tuple[str, bool] | None:
    """The query and whether it was run explicitly (Enter, Run again); None (with a message) for none or too long."""
    # No max_chars on the box: the browser would drop a longer paste without a word, and a longer ?q= would be cut
    # silently. A query over the limit is shown as it is, refused with a message, and never searched or recorded.
    query = st.text_input(
        "Query",
        key=keys.QUERY,
        bind="query-params",
        on_change=lambda: st.session_state.update({keys.RUN_LOOKUP: True}),
        placeholder="e.g. Pod is crash looping.  /  PostgreSQL replication lag on the standby",
    )
    explicit = bool(st.session_state.pop(keys.RUN_LOOKUP, False))
    if not query or not query.strip():
        st.info("Type a question or an alert summary and press Enter.", icon=":material/keyboard:")
        return None
    if len(query.strip()) > MAX_QUERY_CHARS:
        st.warning(
            f"**The query is {len(query.strip()):,} characters long**: a lookup takes at most {MAX_QUERY_CHARS:,}, so "
            f"nothing was searched or recorded. Shorten it in the box, or search its first {MAX_QUERY_CHARS:,} "
            "characters (the box then shows exactly what is searched).",
            icon=":material/content_cut:",
        )
        label = f"Search the first {MAX_QUERY_CHARS:,} characters"
        st.button(label, key="lookup_cut", type="primary", on_click=search_the_start)
        return None
    return query, explicit


def index_notice(ctx: resources.AppContext) -> IndexHealth | None:
    """Before the first ingest, say L1 has nothing to search and offer the ingest; a damaged index offers its repair."""
    settings = ctx.settings
    health = ingest.index_health(ctx) if ctx.store is not None and settings.l1_enabled else None
    if health is None:
        return None
    ingest.health_notice(ctx, health, key="repair_for_lookup")
    if health.state != "not_indexed":
        return health
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
    return health


def lookup_once(
    ctx: resources.AppContext, query: str, explicit: bool, health: IndexHealth | None
) -> tuple[LookupResult, bool] | None:
    """The lookup and whether it was recorded. Only an explicit run records; a link, a settings change or a rerun of
    the same view shows the lookup without recording it."""
    settings = ctx.settings
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
        return last[1], last[2]
    recorded = explicit and ctx.recorder is not None and ctx.records_lookups
    try:
        result = lookup_knowledge(query, ctx.lookup_services(record=recorded), settings.options())
    except QueryError as exc:
        render.error("Query refused", exc, "Change the query and press Enter.")
        return None
    except LookupLabError as exc:
        render.error("Lookup failed", exc, "Check the sidebar status, fix what it names, and press Enter again.")
        return None
    st.session_state[keys.LAST_LOOKUP] = (view, result, recorded)
    return result, recorded


def run_again_bar(ctx: resources.AppContext, recorded: bool) -> None:
    """The Run again button, and why this view was not recorded."""
    b1, b2 = st.columns([1, 5], vertical_alignment="center")
    b1.button(
        "Run again",
        key="lookup_run",
        help="Run the lookup again and record a new invocation.",
        on_click=lambda: st.session_state.update({keys.RUN_LOOKUP: True}),
    )
    if not ctx.records_lookups:
        b2.caption(
            "**Not recorded**: the app is read-only and records no lookup (LOOKUP_READ_ONLY_RECORDS=true would record "
            "the lookups typed here)."
        )
    elif not recorded and ctx.recorder is not None:
        b2.caption(
            "Not recorded: this view was opened from a link or a settings change. Press Enter in the query box "
            "or **Run again** to run it as a recorded invocation."
        )


def main() -> None:
    ctx = resources.page_context()
    settings = ctx.settings
    st.title("Lookup")
    st.caption(
        "One query through `lookup_knowledge`: the L0 hints, the routing decision, L1 candidates, the final "
        "results, where the time went, and the record that was stored. The query and the sidebar settings "
        "are in the URL: copy it to share this view."
    )
    asked = read_query()
    if asked is None:
        return
    query, explicit = asked
    health = index_notice(ctx)
    done = lookup_once(ctx, query, explicit, health)
    if done is None:
        return
    result, recorded = done
    run_again_bar(ctx, recorded)
    lookup_view.answer(result, settings)  # the answer first: the top result, the verdict, why each result is where it is
    lookup_view.query_and_routing(result, unindexed=health is not None and health.state == "not_indexed")
    lookup_view.results(result, settings)
    lookup_view.kept_out(ctx, result, settings)
    why_not_view.picker(ctx, query)  # why not this entry? (records nothing)
    judging.judge_results(
        ctx,
        query=result.query,
        found=[r.to_dict() for r in result.results],
        routed=result.l1.category,
        source=f"Lookup, invocation {result.invocation_id}" if recorded else "Lookup",
        key="judge_lookup",
        invocation=result.invocation_id if recorded else None,
    )
    lookup_view.hint_panels(result.l0)
    lookup_view.l1_candidates(result)
    lookup_view.timings_and_record(ctx, result, recorded=recorded)


main()
