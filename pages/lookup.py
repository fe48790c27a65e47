"""Lookup: the hint inspector. One query through lookup_knowledge, every stage shown."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_support import charts, ingest, judging, keys, render, resources, urls
from app_support.render import md
from retrieval.core.candidates import Candidate
from retrieval.core.lookup import MAX_QUERY_CHARS, lookup_knowledge
from retrieval.core.ranking import explain
from retrieval.core.relevance import fit_words, percent
from retrieval.core.runner import weights_of
from retrieval.errors import LookupLabError, QueryError
from retrieval.evals.comparison import excluded_by_filter
from retrieval.types.modes import L1Status

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

hints = result.l0
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

# --- the answer first: the top result, the verdict, why each result is where it is ----------------------------
rel = result.relevance
if result.results and rel.semantic_support:
    top = result.results[0]
    st.markdown(f"### {md(top.title)}\n`{md(top.entry_id)}` · domain {md(top.domain)} · from {md(str(top.source))}")
elif result.results:
    top = result.results[0]
    st.markdown(
        f"### No supported answer in the knowledge base\nThe nearest entry: **{md(top.title)}** · `{md(top.entry_id)}` · "
        f"domain {md(top.domain)} · from {md(str(top.source))}"
    )
else:
    st.markdown("### No result\nNeither L0 nor L1 found anything for this query.")
show = {"high": st.success, "medium": st.info}.get(rel.level, st.warning)
show(f"**Relevance: {md(rel.level)}** (semantic support: {'yes' if rel.semantic_support else 'no'}). {md(rel.reason)}")
named = bool(result.results) and result.results[0].named
c1, c2, c3, c4 = st.columns(4)
c1.metric("Layer", str(result.layer))
c2.metric("L1 status", result.l1.status.value)
c3.metric(
    "Support estimate",
    percent(rel.confidence),
    delta="named in full: supported" if named else None,
    delta_color="off",
    help="The estimated chance that the top result is right: its similarity and BM25F score read against what a "
    "sibling entry gets in this knowledge base (fitted on its own probes), weighed by a model fitted on real queries of "
    "every style; semantic support is claimed at or above the threshold, and always for an entry the query names in full.",
)
c4.metric("Total latency", f"{result.timings_ms.get('total', 0.0):.0f} ms")
if rel.confidence is not None and rel.threshold is not None:
    st.caption(
        f"Support estimate {percent(rel.confidence)}: of lookups whose top result gets this estimate, about that share "
        f"have it right. Support is claimed from {percent(rel.threshold)}; an entry the query names in full is always "
        f"supported. Model: {md(result.embedding_model)}; {md(fit_words(rel.fit))}."
    )
if result.results:
    # "why here" as a list: in a table column its sentences squeezed every row to 8-10 lines
    weights = weights_of(settings.options())
    why_here = [f"**#{i}** {md(r.entry_id)}: {md(explain(r, weights))}" for i, r in enumerate(result.results, 1)]
    st.markdown("**Why here**  \n" + "  \n".join(why_here))

all_keys = render.match_keys(t.key for t in hints.matched_keywords)
if result.searched:
    st.markdown("**Query as searched** (its template expressions as the words they stand for; words L0 matched highlighted)")
    render.highlighted(result.searched, all_keys)
    st.caption(f"As sent: {md(result.query)}")
else:
    st.markdown("**Query** (words L0 matched are highlighted)")
    render.highlighted(result.query, all_keys)

routing = result.routing if hints.has_match else f"no L0 match: {result.routing}"
st.info(f"**Routing:** {md(routing)}", icon=":material/alt_route:")
if result.l1.status is L1Status.FAILED and unindexed:
    st.caption("L1 found no collection to search (see above): the results come from L0 only.")
elif result.l1.status.fault:
    st.warning(
        f"**L1 {md(result.l1.status.value)}**: {md(result.l1.error)}  \nThe results below come from L0 only "
        "(fallback); they carry no semantic support.",
        icon=":material/warning:",
    )
elif result.l1.status is L1Status.DISABLED:
    st.caption("L1 is switched off in the sidebar: the results come from L0 only.")

# --- results -----------------------------------------------------------------------------------------------
st.subheader("Results")
if result.results:
    st.table(
        pd.DataFrame(
            [
                {
                    "rank": i,
                    "entry_id": md(r.entry_id),
                    "title": md(r.title),
                    "domain": md(r.domain),
                    "source": str(r.source),
                    "score": f"{r.score:.4f}",
                    "L0 score": "" if r.l0_score is None else f"{r.l0_score:.3f}",
                    "similarity": "" if r.l1_score is None else f"{r.l1_score:.4f}",
                }
                for i, r in enumerate(result.results, 1)
            ]
        ),
        hide_index=True,
    )
    with st.expander("Open a result's full entry (frontmatter, text, index terms)", icon=":material/article:"):
        base = resources.base_settings()
        for i, r in enumerate(result.results, 1):
            st.page_link(
                "pages/corpus.py",
                label=f"#{i} {md(r.entry_id)}: {md(r.title)}",
                icon=":material/article:",
                query_params=urls.entry_params(r.entry_id, settings, base),
            )
    st.caption(
        "**score**: the weighted sum of the signals that found the entry, each scaled to this query's best "
        "candidate (1.0), so only ranks within one query compare; **similarity**: the query against the "
        "entry's best chunk (what semantic support is judged on); **L0 score**: the raw keyword score of L0."
    )
else:
    st.caption("No results: neither L0 nor L1 found anything.")
if result.l1.category and result.l1.status is L1Status.OK:
    kept_out: list[tuple[int, Candidate]] | None
    try:
        searched = result.searched or result.query
        kept_out = excluded_by_filter(searched, result.l1.category, ctx.lookup_services(record=False), settings)
    except Exception as exc:
        kept_out = None
        st.caption(f"What the filter kept out cannot be shown: {md(type(exc).__name__)}: {md(exc)}")
    if kept_out is not None:
        st.markdown(
            f"**Kept out by the filter** (category = {md(result.l1.category)}): the best of the unfiltered "
            f"top {settings.top_k} from other domains, which these results do not include"
        )
        if kept_out:
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "unfiltered rank": rank,
                            "entry_id": c.entry_id,
                            "title": c.title,
                            "domain": c.domain,
                            "similarity": None if c.similarity is None else round(c.similarity, 4),
                        }
                        for rank, c in kept_out
                    ]
                ),
                hide_index=True,
            )
        else:
            st.caption(f"none: the unfiltered top {settings.top_k} are all in {md(result.l1.category)}")
        st.page_link(
            "pages/filter_comparison.py",
            label="Compare filtered and unfiltered L1 for this query",
            icon=":material/compare_arrows:",
            query_params={**urls.setting_params(settings, resources.base_settings()), keys.COMPARE_QUERY: result.query},
        )
judging.judge_results(
    ctx,
    query=result.query,
    found=[r.to_dict() for r in result.results],
    routed=result.l1.category,
    source=f"Lookup, invocation {result.invocation_id}" if recorded else "Lookup",
    key="judge_lookup",
)

# --- L0 hints ----------------------------------------------------------------------------------------------
st.subheader("L0 hints")
if not hints.has_match:
    st.caption("L0 matched nothing in this query: no titles, keywords, domains or entities.")
p1, p3, p4 = st.columns([4, 2, 2])
p2 = st.container()  # the keywords table under the panels, the page's full width: every column shows
with p1.container(border=True):
    st.markdown("**Matched titles**")
    for title in hints.matched_titles:
        matched = [t.key for m in hints.matches if m.title == title for t in m.terms]
        render.highlighted(title, render.match_keys(matched))
    if not hints.matched_titles:
        st.caption("none")
with p2.container(border=True):
    st.markdown("**Keywords** (the query's words that matched, with the entry field each matched)")
    if hints.matched_keywords:
        st.dataframe(
            pd.DataFrame([t.to_dict() for t in hints.matched_keywords], columns=["term", "field", "weight", "key"]),
            hide_index=True,
            height=min(38 + 35 * len(hints.matched_keywords), 250),
            column_config={"key": st.column_config.TextColumn("match key", help="the normalised form L0 compared")},
        )
    else:
        st.caption("none")
with p3.container(border=True):
    st.markdown("**Domains**")
    st.markdown("\n".join(f"- {md(d)}" for d in hints.domains) if hints.domains else "_none_")
with p4.container(border=True):
    st.markdown("**Entities**")
    st.markdown("\n".join(f"- {md(e)}" for e in hints.entities) if hints.entities else "_none_")
if hints.matches:
    shown = (
        f"the best {len(hints.matches)} of {hints.match_count:,}"
        if hints.match_count > len(hints.matches)
        else str(len(hints.matches))
    )
    with st.expander(f"L0 matches ({shown}): score and matched terms per entry"):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "entry_id": m.entry_id,
                        "title": m.title,
                        "domain": m.domain,
                        "score": round(m.score, 3),
                        "named in full": m.named,
                        "fields": ", ".join(m.fields),
                        "terms": ", ".join(f"{t.term} ({t.field})" for t in m.terms),
                    }
                    for m in hints.matches
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={
                "entry_id": st.column_config.TextColumn(width="medium"),
                "title": st.column_config.TextColumn(width="medium"),
                "domain": st.column_config.TextColumn(width="small"),
                "score": st.column_config.NumberColumn(width="small", format="%.3f"),
                "named in full": st.column_config.CheckboxColumn(width="small"),
                "fields": st.column_config.TextColumn(width="small"),
                "terms": st.column_config.TextColumn(width="large"),
            },
        )

# --- L1 ----------------------------------------------------------------------------------------------------
flt = f"filtered on category = {result.l1.category}" if result.l1.category else "unfiltered"
l1_box = st.expander(
    f"L1 candidates: {len(result.l1.candidates)} vector, {len(result.l1.lexical)} BM25F, {flt}", icon=":material/list:"
)
l1_box.caption(
    f"{md(result.l1.mode)}, {md(flt)}, status **{md(result.l1.status.value)}**, "
    f"{len(result.l1.candidates)} candidates (cosine distance: lower is closer)"
)
if result.l1.candidates:
    l1_box.table(
        pd.DataFrame(
            [
                {  # st.table renders cells as Markdown: corpus text goes in escaped
                    "rank": i,
                    "entry_id": md(c.entry_id),
                    "title": md(c.title),
                    "domain": md(c.domain),
                    "distance": "" if c.distance is None else f"{c.distance:.4f}",
                    "score": f"{c.score:.4f}",
                    "chunk": c.chunk_index,
                }
                for i, c in enumerate(result.l1.candidates, 1)
            ]
        ),
        hide_index=True,
    )
if result.l1.lexical:
    l1_box.caption(
        f"BM25F candidates ({len(result.l1.lexical)}; title and file-name words, keywords, entities, body), "
        f"{md(flt)}; similarity is the query vector against the entry's best chunk"
    )
    l1_box.table(
        pd.DataFrame(
            [
                {
                    "rank": i,
                    "entry_id": md(c.entry_id),
                    "title": md(c.title),
                    "domain": md(c.domain),
                    "BM25F score": f"{c.score:.3f}",
                    "similarity": "" if c.similarity is None else f"{c.similarity:.4f}",
                }
                for i, c in enumerate(result.l1.lexical, 1)
            ]
        ),
        hide_index=True,
    )

# --- latency and record ------------------------------------------------------------------------------------
with st.expander("Where the time went (stage timings)", icon=":material/timer:"):
    st.plotly_chart(charts.latency_bar(result.timings_ms), width="stretch")

with st.expander("Stored invocation record (tool_invocation row, read back from DuckDB)"):
    if ctx.recorder is None:
        st.caption(f"Not recorded: the invocation store is not available ({md(ctx.recorder_error)}).")
    elif not recorded:
        st.caption("Not recorded: press Run again to record this lookup.")
    else:
        try:
            row = ctx.recorder.get(result.invocation_id)
        except LookupLabError as exc:
            row = None
            render.error("The record cannot be read back", exc, "It is safe in the spool; reload in a moment.")
        if row is not None:
            st.json(render.as_json(row), expanded=2)
        else:
            st.caption(f"Invocation {md(result.invocation_id)} is not in the store yet; reload in a moment.")
with st.expander("Result as returned by lookup_knowledge"):
    st.json(render.as_json(result.to_dict()), expanded=1)
