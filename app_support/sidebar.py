"""The frame every page shares: the settings widgets, the connection status, the L1-unavailable banner."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from retrieval.config import MAX_CANDIDATE_DEPTH, Settings
from retrieval.engine.node_health import NodeHealth, node_health
from retrieval.types.models import MODELS
from retrieval.types.modes import LookupMode, MissingScore, values

from . import ingest, keys, resources
from .render import md
from .setting_widgets import BY_FIELD, WIDGETS, SettingWidget

MODE_CAPTIONS = {"fusion": "vector + BM25F + L0, fused (default)", "near_vector": "vector + L0", "hybrid": "Weaviate hybrid + L0"}


def settings_widgets(base: Settings) -> None:
    """Shared settings, kept in session_state and in the URL: the rows of setting_widgets.WIDGETS, each drawn
    by its function in DRAW, starting at the base's value."""
    state = st.session_state

    def draw(ranking: bool) -> None:
        for widget in WIDGETS:
            if widget.ranking == ranking and widget.shown(lambda field: state.get(BY_FIELD[field].key)):
                DRAW[widget.key](widget, base)

    with st.sidebar:
        st.subheader("Settings")
        draw(ranking=False)
        changed = [w.label for w in WIDGETS if w.ranking and state.get(w.key) not in (None, getattr(base, w.field))]
        with st.expander("Fusion weights, depth and support" + (f" ({len(changed)} changed)" if changed else "")):
            st.caption("What a sweep varies, for every page; lookup.yaml and LOOKUP_* give the starting values.")
            draw(ranking=True)


def _corpus(w: SettingWidget, base: Settings) -> None:
    labels = [c.label for c in resources.corpus_choices(base)]
    switch = st.session_state.pop(keys.CORPUS_SWITCH, None)  # a folder just added on the Corpus page
    if switch in labels:
        st.session_state[w.key] = switch
    st.selectbox(w.label, labels, index=0, key=w.key, bind="query-params", help=w.help)


def _model(w: SettingWidget, base: Settings) -> None:
    models = list(MODELS)
    st.selectbox(w.label, models, index=models.index(base.embedding_model), key=w.key, bind="query-params", help=w.help)


def _top_k(w: SettingWidget, base: Settings) -> None:
    st.number_input(
        w.label, min_value=1, max_value=50, value=int(base.top_k), step=1, key=w.key, bind="query-params", help=w.help
    )


def _l1(w: SettingWidget, base: Settings) -> None:
    st.toggle(w.label, value=bool(base.l1_enabled), key=w.key, bind="query-params", help=w.help)


def _mode(w: SettingWidget, base: Settings) -> None:
    st.radio(
        w.label,
        list(values(LookupMode)),
        index=values(LookupMode).index(base.search_mode),
        captions=[MODE_CAPTIONS[m] for m in values(LookupMode)],
        key=w.key,
        bind="query-params",
        horizontal=True,
        help=w.help,
    )


def _alpha(w: SettingWidget, base: Settings) -> None:
    st.slider(
        w.label,
        min_value=0.0,
        max_value=1.0,
        value=float(base.hybrid_alpha),
        step=0.05,
        key=w.key,
        bind="query-params",
        help=w.help,
    )


MAX_WEIGHT = 100.0


def _weight(w: SettingWidget, base: Settings) -> None:
    value = float(getattr(base, w.field))
    st.number_input(
        w.label,
        min_value=0.0,
        max_value=MAX_WEIGHT,
        value=value,
        step=0.1,
        format="%g",
        key=w.key,
        bind="query-params",
        help=w.help,
    )


def _depth(w: SettingWidget, base: Settings) -> None:
    value = int(base.candidate_depth)
    st.number_input(
        w.label, min_value=1, max_value=MAX_CANDIDATE_DEPTH, value=value, step=1, key=w.key, bind="query-params", help=w.help
    )


def _missing(w: SettingWidget, base: Settings) -> None:
    choices = list(values(MissingScore))
    st.selectbox(w.label, choices, index=choices.index(str(base.missing_score)), key=w.key, bind="query-params", help=w.help)


def _support(w: SettingWidget, base: Settings) -> None:
    value = base.support_threshold
    st.number_input(
        w.label,
        min_value=0.0,
        max_value=1.0,
        value=value,
        step=0.01,
        format="%g",
        placeholder="the model's fitted cut",
        key=w.key,
        bind="query-params",
        help=w.help,
    )


DRAW: dict[str, Callable[[SettingWidget, Settings], None]] = {
    keys.CORPUS: _corpus,
    keys.MODEL: _model,
    keys.TOP_K: _top_k,
    keys.L1_ON: _l1,
    keys.MODE: _mode,
    keys.ALPHA: _alpha,
    keys.VECTOR_WEIGHT: _weight,
    keys.LEXICAL_WEIGHT: _weight,
    keys.L0_WEIGHT: _weight,
    keys.NAME_WEIGHT: _weight,
    keys.CANDIDATE_DEPTH: _depth,
    keys.MISSING_SCORE: _missing,
    keys.SUPPORT: _support,
}


def status(ctx: resources.AppContext) -> None:
    s = ctx.settings
    with st.sidebar:
        st.subheader("Status")
        if ctx.read_only:
            if ctx.records_lookups:
                st.markdown(":orange-badge[Read-only] :blue-badge[Typed lookups recorded]")
                recording = "Only the lookups typed on Lookup are recorded (LOOKUP_READ_ONLY_RECORDS is true)"
            else:
                st.markdown(":orange-badge[Read-only] :gray-badge[Nothing recorded]")
                recording = (
                    "Nothing is recorded, not even the lookups typed on Lookup (LOOKUP_READ_ONLY_RECORDS=true records those)"
                )
            st.caption(
                f"Ingest, Re-index and Reload are off: {md(ctx.access.reason)}. {recording}: Evaluate saves no run and "
                "records nothing, Replay records nothing, judging and Sweep's Save write no file; the SQL console is "
                "read-only either way."
            )
        if ctx.opening.moved:
            st.warning(md(ctx.opening.moved), icon=":material/swap_horiz:")
        if ctx.l1_starting:
            l1_starting_status(ctx)
        elif ctx.conn.ok:
            st.markdown(f":green-badge[L1 connected] {md(ctx.conn.target)}")
            nodes = cluster_nodes(ctx)
            if nodes and len(nodes) > 1:
                healthy = sum(n.healthy for n in nodes)
                badge = ":green-badge" if healthy == len(nodes) else ":orange-badge"
                st.markdown(f"{badge}[Cluster: {healthy} of {len(nodes)} nodes healthy]")
                st.caption(", ".join(f"{md(n.name)} {md(n.status)}" for n in nodes))
            health = ingest.health_badge(ctx)  # a badge and a caption when the index needs repair or is loading
            indexed, chunks, why = (None, None, None) if health.state == "loading" else resources.collection_summary(ctx)
            if health.state == "loading":
                pass
            elif why:
                st.caption(f"Collection **{md(s.collection)}**: cannot be read ({md(why)})")
            else:
                st.caption(
                    f"Collection **{md(s.collection)}**: {indexed} of {len(ctx.corpus.entries)} entries indexed, {chunks} chunks"
                )
        else:
            st.markdown(f":red-badge[L1 unavailable] {md(ctx.conn.target)}")
        problems = f", {len(ctx.corpus.problems)} skipped files" if ctx.corpus.problems else ""
        st.caption(
            f"Corpus: **{md(ctx.corpus.root)}**: {len(ctx.corpus.entries)} entries in "
            f"{len(ctx.corpus.domains)} domains{md(problems)}"
        )
        if ctx.recorder is None:
            st.caption(f"Invocation store: not available ({md(ctx.recorder_error)}); lookups are not recorded")
        else:
            try:
                count = ctx.recorder.count()
                rows = f"{count:,} row{'' if count == 1 else 's'}"
            except Exception as exc:
                rows = f"cannot be read now ({type(exc).__name__}); try again in a moment"
            st.caption(f"Invocation store: **{md(ctx.recorder.db_path)}**, {md(rows)}")


@st.cache_data(ttl=10, show_spinner=False)
def _node_health(target: str, _client) -> tuple[NodeHealth, ...] | None:
    try:
        return node_health(_client)
    except Exception:
        return None


def cluster_nodes(ctx: resources.AppContext) -> tuple[NodeHealth, ...] | None:
    """The nodes of the connected Weaviate from /v1/nodes (asked at most every 10 s); None when it does not say."""
    return _node_health(ctx.conn.target, ctx.conn.client) if ctx.conn.ok else None


POLL_S = 1.0  # while Weaviate starts, the status looks again this often, and reruns the page once it is up


def l1_starting_status(ctx: resources.AppContext) -> None:
    """The status of a connection still opening in the background: a badge with the time so far, looked at again
    every POLL_S by a fragment that reruns the whole page once the connection is open (or has failed)."""

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        if not ctx.l1_starting:
            st.rerun(scope="app")
        st.markdown(f":blue-badge[L1 starting] {md(ctx.opening.target)}")
        st.caption(
            f"Weaviate is starting in the background ({ctx.opening.waited_s():.0f} s so far): this page works on L0 "
            "meanwhile, and a page or lookup that needs L1 waits for it."
        )

    poll()


def l1_banner(ctx: resources.AppContext) -> None:
    """Shown on every page while Weaviate cannot be reached; the button reconnects without a restart. While it is
    still starting, the sidebar says so instead (l1_starting_status)."""
    if ctx.l1_starting or ctx.conn.ok:
        return
    with st.container(border=False):
        st.warning(
            f"**L1 unavailable**: {md(ctx.conn.error)}  \nLookups answer from the L0 keyword hints only. "
            "Start Weaviate (or check LOOKUP_WEAVIATE_URL), then retry.",
            icon=":material/cloud_off:",
        )
        st.button("Retry connection", key="retry_connection", on_click=resources.retry_connection)
