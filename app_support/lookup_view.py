"""The Lookup page's parts: the answer first, the query as searched and its routing, the results, what the filter kept
out, the L0 hints, the L1 candidates, the timings and the record. Each takes the LookupResult and renders."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.config import Settings
from retrieval.core.candidates import Candidate
from retrieval.core.hints import L0Hints
from retrieval.core.lookup import LookupResult
from retrieval.core.ranking import explain
from retrieval.core.relevance import Relevance, fit_words, percent
from retrieval.core.runner import weights_of
from retrieval.errors import LookupLabError
from retrieval.evals.comparison import excluded_by_filter
from retrieval.types.modes import L1Status

from . import charts, render, resources, urls
from .render import md

ESTIMATE_HELP = (
    "The estimated chance that the top result is right: its similarity and BM25F score read against what a sibling entry "
    "gets in this knowledge base (fitted on its own probes), weighed by a model fitted on real queries of every style; "
    "semantic support is claimed at or above the threshold, and always for an entry the query names in full."
)


def verdict(rel: Relevance) -> None:
    """The claim on the top result, coloured by its level."""
    show = {"high": st.success, "medium": st.info}.get(rel.level, st.warning)
    show(f"**Relevance: {md(rel.level)}** (semantic support: {'yes' if rel.semantic_support else 'no'}). {md(rel.reason)}")


def headline(result: LookupResult) -> None:
    """A supported top result as the heading, then the verdict; with nothing supported the verdict first and the top
    result as the nearest entry, never as the answer."""
    rel = result.relevance
    if not result.results:
        st.markdown("### No result\nNeither L0 nor L1 found anything for this query.")
        verdict(rel)
        return
    top = result.results[0]
    where = f"{render.code(top.entry_id)} · domain {md(top.domain)} · from {md(str(top.source))}"
    if rel.semantic_support:
        st.markdown(f"### {md(top.title)}\n{where}")
        verdict(rel)
        return
    st.markdown("### No supported answer in the knowledge base")
    verdict(rel)
    st.markdown(f"The nearest entry: **{md(top.title)}** · {where}")


def answer(result: LookupResult, settings: Settings) -> None:
    """The verdict first: the top result (or "no supported answer" and the nearest entry), the claim, the tiles, why
    each result is where it is."""
    rel = result.relevance
    headline(result)
    named = bool(result.results) and result.results[0].named
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Layer", str(result.layer))
    c2.metric("L1 status", result.l1.status.value)
    delta = "named in full: supported" if named else None
    c3.metric("Support estimate", percent(rel.confidence), delta=delta, delta_color="off", help=ESTIMATE_HELP)
    c4.metric("Total latency", f"{result.timings_ms.get('total', 0.0):.0f} ms")
    if rel.confidence is not None and rel.threshold is not None:
        st.caption(
            f"Support estimate {percent(rel.confidence)}: of lookups whose top result gets this estimate, about that share "
            f"have it right. Support is claimed from {percent(rel.threshold)}; an entry the query names in full is always "
            f"supported. Model: {md(result.embedding_model)}; {md(fit_words(rel.fit))}."
        )
    if result.results:  # as a list: in a table column its sentences squeezed every row to 8-10 lines
        weights = weights_of(settings.options())
        why_here = [f"**#{i}** {md(r.entry_id)}: {md(explain(r, weights))}" for i, r in enumerate(result.results, 1)]
        st.markdown("**Why here**  \n" + "  \n".join(why_here))


def query_and_routing(result: LookupResult, *, unindexed: bool) -> None:
    """The query as searched with the words L0 matched highlighted, the routing, and what L1 did."""
    hints = result.l0
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


def results(result: LookupResult, settings: Settings) -> None:
    """The results table, a link to each result's whole entry, and what the columns mean."""
    st.subheader("Results")
    if not result.results:
        st.caption("No results: neither L0 nor L1 found anything.")
        return
    if not result.relevance.semantic_support:
        st.caption("None of these has semantic support: they are the nearest entries, not answers.")
    rows = [  # the figures first: on a phone the table scrolls sideways, and the ids and titles are long
        {
            "rank": i,
            "score": f"{r.score:.4f}",
            "similarity": "" if r.l1_score is None else f"{r.l1_score:.4f}",
            "entry_id": md(r.entry_id),
            "title": md(r.title),
            "domain": md(r.domain),
            "source": str(r.source),
            "L0 score": "" if r.l0_score is None else f"{r.l0_score:.3f}",
        }
        for i, r in enumerate(result.results, 1)
    ]
    st.table(pd.DataFrame(rows), hide_index=True)
    with st.expander("Open a result's full entry (frontmatter, text, index terms)", icon=":material/article:"):
        base = resources.base_settings()
        for i, r in enumerate(result.results, 1):
            label = f"#{i} {md(r.entry_id)}: {md(r.title)}"
            params = urls.entry_params(r.entry_id, settings, base)
            st.page_link("pages/corpus.py", label=label, icon=":material/article:", query_params=params)
    st.caption(
        "**score**: the weighted sum of the signals that found the entry, each scaled to this query's best "
        "candidate (1.0), so only ranks within one query compare; **similarity**: the query against the "
        "entry's best chunk (what semantic support is judged on); **L0 score**: the raw keyword score of L0."
    )


def kept_out(ctx: resources.AppContext, result: LookupResult, settings: Settings) -> None:
    """What the L0 filter kept out (for a filtered lookup), and for every lookup L1 answered a link to the comparison
    of filtered and unfiltered L1 in the lookup's own mode."""
    if result.l1.status is not L1Status.OK:
        return
    if result.l1.category:
        filtered_out(ctx, result, settings)
    else:
        st.caption(
            f"No filter on this lookup ({md(result.routing)}): the comparison shows what L1 finds with and without "
            "the filter L0 would derive, here the same unfiltered search on both sides."
        )
    st.page_link(
        "pages/filter_comparison.py",
        label=f"Compare filtered and unfiltered L1 for this query ({settings.search_mode})",
        icon=":material/compare_arrows:",
        query_params=urls.compare_params(result.query, settings, resources.base_settings()),
    )


def filtered_out(ctx: resources.AppContext, result: LookupResult, settings: Settings) -> None:
    """The best unfiltered hits from other domains, which the filter kept out of these results."""
    found: list[tuple[int, Candidate]]
    try:
        found = excluded_by_filter(
            result.searched or result.query, result.l1.category, ctx.lookup_services(record=False), settings
        )
    except Exception as exc:  # the page goes on without it
        st.caption(f"What the filter kept out cannot be shown: {md(type(exc).__name__)}: {md(exc)}")
        return
    st.markdown(
        f"**Kept out by the filter** (category = {md(result.l1.category)}): the best of the unfiltered "
        f"top {settings.top_k} from other domains, which these results do not include"
    )
    if not found:
        st.caption(f"none: the unfiltered top {settings.top_k} are all in {md(result.l1.category)}")
        return
    rows = [
        {
            "unfiltered rank": rank,
            "entry_id": c.entry_id,
            "title": c.title,
            "domain": c.domain,
            "similarity": None if c.similarity is None else round(c.similarity, 4),
        }
        for rank, c in found
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True)


def hint_panels(hints: L0Hints) -> None:
    """L0's hint data: matched titles, keywords (as the query writes them, with the field and match key), domains, entities."""
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
    l0_matches(hints)


MATCH_COLUMNS = {
    "entry_id": st.column_config.TextColumn(width="medium"),
    "title": st.column_config.TextColumn(width="medium"),
    "domain": st.column_config.TextColumn(width="small"),
    "score": st.column_config.NumberColumn(width="small", format="%.3f"),
    "named in full": st.column_config.CheckboxColumn(width="small"),
    "fields": st.column_config.TextColumn(width="small"),
    "terms": st.column_config.TextColumn(width="large"),
}


def l0_matches(hints: L0Hints) -> None:
    """Each entry L0 matched: its score, whether it is named in full, and the terms that matched it."""
    if not hints.matches:
        return
    listed = len(hints.matches)
    shown = f"the best {listed} of {hints.match_count:,}" if hints.match_count > listed else str(listed)
    rows = [
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
    with st.expander(f"L0 matches ({shown}): score and matched terms per entry"):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=MATCH_COLUMNS)


def l1_candidates(result: LookupResult) -> None:
    """Both L1 lists as they came back, folded: the answer comes first."""
    l1 = result.l1
    flt = f"filtered on category = {l1.category}" if l1.category else "unfiltered"
    box = st.expander(f"L1 candidates: {len(l1.candidates)} vector, {len(l1.lexical)} BM25F, {flt}", icon=":material/list:")
    box.caption(
        f"{md(l1.mode)}, {md(flt)}, status **{md(l1.status.value)}**, {len(l1.candidates)} candidates "
        "(cosine distance: lower is closer)"
    )
    if l1.candidates:  # st.table renders cells as Markdown: corpus text goes in escaped
        rows = [
            {
                "rank": i,
                "entry_id": md(c.entry_id),
                "title": md(c.title),
                "domain": md(c.domain),
                "distance": "" if c.distance is None else f"{c.distance:.4f}",
                "score": f"{c.score:.4f}",
                "chunk": c.chunk_index,
            }
            for i, c in enumerate(l1.candidates, 1)
        ]
        box.table(pd.DataFrame(rows), hide_index=True)
    if l1.lexical:
        box.caption(
            f"BM25F candidates ({len(l1.lexical)}; title and file-name words, keywords, entities, body), "
            f"{md(flt)}; similarity is the query vector against the entry's best chunk"
        )
        rows = [
            {
                "rank": i,
                "entry_id": md(c.entry_id),
                "title": md(c.title),
                "domain": md(c.domain),
                "BM25F score": f"{c.score:.3f}",
                "similarity": "" if c.similarity is None else f"{c.similarity:.4f}",
            }
            for i, c in enumerate(l1.lexical, 1)
        ]
        box.table(pd.DataFrame(rows), hide_index=True)


def timings_and_record(ctx: resources.AppContext, result: LookupResult, *, recorded: bool) -> None:
    """Where the time went, the stored tool_invocation row read back, and the result as returned."""
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
