"""The Traffic page's mix section: recorded calls beside the chosen eval sets, feature by feature (a MixReport)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from retrieval.errors import LookupLabError, TrafficError
from retrieval.evals.catalog import preferred_eval_set
from retrieval.evals.sets import load_eval_set
from retrieval.traffic.eval_side import eval_feature_counts
from retrieval.traffic.features import FeatureCounts
from retrieval.traffic.mix import DIVERGENCE, FEATURE_LABELS, FeatureMix, MixReport, mix_report
from retrieval.types.options import LookupOptions

from . import eval_ui, keys, render, resources
from .render import md

SIDE_COLORS = {"traffic": "#4c78a8", "eval sets": "#f58518"}


def eval_counts(set_paths: tuple[str, ...], options: LookupOptions, collection: str, services: Any) -> FeatureCounts:
    """The eval side of the mix (eval_feature_counts), looked up once per set files' versions, options and collection."""
    stamps = tuple(Path(p).stat().st_mtime_ns if Path(p).exists() else 0 for p in set_paths)
    return _eval_counts(set_paths, stamps, options, collection, services)


@st.cache_data(ttl=600, max_entries=16, show_spinner="Looking up the eval sets' cases…")
def _eval_counts(
    set_paths: tuple[str, ...], stamps: tuple[int, ...], options: LookupOptions, collection: str, _services: Any
) -> FeatureCounts:
    sets = [load_eval_set(p) for p in set_paths]
    return eval_feature_counts(sets, _services, options, corpus=f"collection {collection}")


def divergence_table(report: MixReport) -> pd.DataFrame:
    """One row per feature: its divergence, the bin the traffic holds most beyond the eval sets and both sides' share."""
    rows = [
        {
            "feature": FEATURE_LABELS.get(m.feature, m.feature),
            "divergence": round(m.divergence, 3),
            "traffic has more of": m.widest if m.divergence > 0 else "–",
            "traffic": f"{m.share('traffic', m.widest):.0%}",
            "eval sets": f"{m.share('evals', m.widest):.0%}",
        }
        for m in report.features
    ]
    return pd.DataFrame(rows).sort_values("divergence", ascending=False, kind="stable").reset_index(drop=True)


def mix_frame(mix: FeatureMix) -> pd.DataFrame:
    """The feature's two distributions as long rows: bin, side (traffic or eval sets), share."""
    rows = [{"bin": b, "side": "traffic", "share": t} for b, t in zip(mix.bins, mix.traffic, strict=True)]
    rows += [{"bin": b, "side": "eval sets", "share": e} for b, e in zip(mix.bins, mix.evals, strict=True)]
    return pd.DataFrame(rows)


def mix_chart(mix: FeatureMix) -> go.Figure:
    """Grouped horizontal bars, bins down the side (their labels read at 390 px), traffic beside the eval sets."""
    frame = mix_frame(mix)
    fig = go.Figure()
    for side, color in SIDE_COLORS.items():
        part = frame[frame["side"] == side]
        fig.add_trace(
            go.Bar(
                x=part["share"],
                y=part["bin"],
                orientation="h",
                name=side,
                marker_color=color,
                hovertemplate=f"{side}: %{{x:.0%}}<extra>%{{y}}</extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        title=dict(text=f"{FEATURE_LABELS.get(mix.feature, mix.feature)} · JS {mix.divergence:.3f}", font=dict(size=14)),
        xaxis=dict(tickformat=".0%", rangemode="tozero"),
        yaxis=dict(autorange="reversed", automargin=True),
        legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom", title_text=""),
        height=120 + 34 * len(mix.bins),
        margin=dict(l=10, r=10, t=70, b=10),
    )
    return fig


def mix_section(report: MixReport) -> None:
    """The largest difference first, the style the eval sets lack, the table of divergences, a chart per feature."""
    st.markdown(f"**{md(report.sentence)}**")
    if report.lacking is not None:
        st.markdown(md(report.lacking.sentence))
    st.caption(f"Divergence: {md(DIVERGENCE)}. Eval sets: {md(', '.join(report.set_names))}.")
    divergence = st.column_config.NumberColumn(format="%.3f", help=DIVERGENCE)
    st.dataframe(divergence_table(report), hide_index=True, width="stretch", column_config={"divergence": divergence})
    for mix in report.features:
        st.plotly_chart(mix_chart(mix), width="stretch", key=f"traffic-mix-{mix.feature}")
        st.caption(md(mix.sentence))


def beside_eval_sets(ctx: resources.AppContext, traffic: FeatureCounts) -> None:
    """The eval sets picked (at first the one written for the loaded corpus), looked up unrecorded, beside the traffic."""
    st.subheader("The traffic beside the eval sets")
    files = eval_ui.known_set_files(ctx.settings)
    by_label = {f.label: f.path for f in files}
    default = (
        [files[preferred_eval_set(files, ctx.settings.corpus_dir, [e.entry_id for e in ctx.corpus.entries])].label]
        if files
        else []
    )
    picked = st.multiselect("Eval sets", list(by_label), default=default, key=keys.TRAFFIC_SETS)
    st.caption(
        f"Their cases are looked up on the loaded corpus ({md(ctx.settings.collection)}), nothing recorded, and binned "
        "as the recorded calls are."
    )
    if not picked:
        st.info("Pick one or more eval sets to set the traffic beside.", icon=":material/rule:")
        return
    try:
        paths = tuple(str(by_label[label]) for label in picked)
        evals = eval_counts(paths, ctx.settings.options(), ctx.settings.collection, ctx.lookup_services(record=False))
        mix_section(mix_report(traffic, evals, set_names=[Path(p).stem for p in paths]))
    except TrafficError as exc:
        render.error("These eval sets cannot be set beside the traffic", exc, "Pick eval sets written for the loaded corpus.")
    except LookupLabError as exc:
        render.error("The eval sets cannot be looked up", exc, "Fix the file named above, or pick another set.")
