"""Sweep: a grid of settings over eval sets, chosen by cross-validation (retrieval.lab.sweep); save the best."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app_support import charts, eval_ui, jobs, render, resources, sweep_view
from app_support.render import md
from retrieval.errors import LookupLabError
from retrieval.evals.metric_names import labelled, metric_label
from retrieval.evals.sets import EvalSet, load_eval_set
from retrieval.evals.tuning import Grid, parse_grid
from retrieval.lab.sweep import METRIC_NAMES, SweepResult, check_folds, cv_for, fitting_eval_sets, keys_for, sweep_sets
from retrieval.lab.sweep_report import PROMISE_NOTE, held_out_caption, held_out_rows, settings_text

SETS, GRID, FOLDS, REPEATS, RESULT, SAVED = "sweep_sets", "sweep_grid", "sweep_folds", "sweep_repeats", "_sweep", "_sweep_saved"
CV, CHOOSE = "sweep_cv", "sweep_choose"
CV_LABELS = {"sets": "Leave one set out (and one corpus out)", "kfold": "Stratified k-fold"}
CHOOSE_LABELS = {"mean": "Mean of the sets", "worst": "Worst set"}
DEFAULT_GRID = "vector_weight=1,2,3,4;l0_weight=0,0.1,0.2"
METRIC = sweep_view.METRIC


@dataclass(frozen=True)
class SweepForm:
    """What the form asks: the grid (and its text), the validation and the rule that chooses."""

    grid: Grid
    grid_text: str
    cv: str
    rule: str
    folds: int
    repeats: int


def pick_sets(ctx: resources.AppContext) -> tuple[list[str], list[EvalSet]] | None:
    """The eval sets picked among those that fit the loaded corpus, or None with a message."""
    settings = ctx.settings
    known = [e.entry_id for e in ctx.corpus.entries]
    files = fitting_eval_sets(eval_ui.known_set_files(settings), known, settings.corpus_dir)
    if not files:
        st.info("No eval set fits the loaded corpus: pick another corpus in the sidebar, or add a set to eval_sets/.")
        return None
    labels = [f.label for f in files]
    picked = st.multiselect(
        "Eval sets (those that fit the loaded corpus)",
        labels,
        default=[labels[eval_ui.preselected(files, ctx)]],
        key=f"{SETS}-{settings.collection}",  # per corpus: another corpus has other sets
    )
    if not picked:
        st.info("Pick one or more eval sets.")
        return None
    eval_ui.remember(ctx, picked[-1])
    return picked, [load_eval_set(f.path, known_ids=known) for f in files if f.label in picked]


def sweep_form(ctx: resources.AppContext, eval_sets: list[EvalSet]) -> SweepForm | None:
    """The grid, the validation, the rule and the folds; None (with the error) when they cannot run."""
    settings = ctx.settings
    grid_text = st.text_input(
        "Grid",
        value=DEFAULT_GRID,
        key=GRID,
        help="NAME=V1,V2;NAME=… over top_k, search_mode, hybrid_alpha, vector_weight, lexical_weight, l0_weight, "
        "name_weight, support_threshold (as `python -m retrieval sweep --grid`).",
    )
    first, second, third, fourth = st.columns([2, 1.4, 0.8, 0.8])
    methods = list(CV_LABELS)
    default_cv = cv_for(eval_sets, None)
    cv = first.radio(
        "Validation",
        methods,
        index=methods.index(default_cv),
        format_func=CV_LABELS.get,
        key=f"{CV}-{default_cv}",  # the default follows the sets picked: two answerable sets leave one out
        help="Leave one set out chooses the point on the other sets and scores the set left out (it needs two "
        "answerable sets). Stratified k-fold mixes every set into every training fold: it measures new queries of the "
        "styles seen.",
    )
    rule = second.radio("Choose by", list(CHOOSE_LABELS), format_func=CHOOSE_LABELS.get, key=CHOOSE)
    folds = int(third.number_input("Folds", min_value=2, max_value=10, value=5, key=FOLDS, disabled=cv != "kfold"))
    repeats = int(fourth.number_input("Repeats", min_value=1, max_value=20, value=3, key=REPEATS, disabled=cv != "kfold"))
    try:
        grid = parse_grid(grid_text, settings)
        check_folds(eval_sets, folds, repeats, cv)
    except LookupLabError as exc:
        render.error("The sweep cannot run", exc, "Fix the grid or the folds named above.")
        return None
    return SweepForm(grid, grid_text.strip(), cv, rule, folds, repeats)


def run_sweep(ctx: resources.AppContext, eval_sets: list[EvalSet], form: SweepForm) -> SweepResult | None:
    """Sweep every point with a progress bar; a grid over embedding_model searches each model's own collection."""
    settings = ctx.settings

    def sweep(bar: jobs.JobBar) -> SweepResult:
        models = {k.model for k in keys_for(form.grid, settings)} - {settings.embedding_model}
        others = {m: resources.context(settings.with_(embedding_model=m)).lookup_services(record=False) for m in models}
        return sweep_sets(
            eval_sets,
            ctx.lookup_services(record=False),
            settings,
            form.grid,
            cv=form.cv,
            choose=form.rule,
            folds=form.folds,
            repeats=form.repeats,
            progress=bar.stages,
            other_models=others,
        )

    return jobs.run_job(
        "The sweep stopped",
        sweep,
        fix="Fix what it names (see the sidebar status) and run it again.",
        when_down="Check that Weaviate is up (Retry connection) and run it again.",
        start="sweeping…",
    )


def best_section(result: SweepResult, before: str, saved: tuple[str, object] | None) -> None:
    """The best point against the current settings: estimate, in-sample figures, and the held-out tables."""
    best, now, test = result.best, result.current, result.best.vs_current
    validation = result.validation
    st.subheader("Best against current")
    st.markdown(
        f"**Best** `{settings_text(best.point.settings)}`: {sweep_view.estimate_text(result)}, in-sample "
        f"{best.point.metrics[METRIC]:.3f}.  \n"
        f"**{before}** `{settings_text(now.settings)}`: {metric_label(METRIC)} {now.metrics[METRIC]:.3f}. Best − current "
        f"{test['delta']:+.3f}, p = {sweep_view.p_text(test)} (paired t-test over {test['cases']} cases): "
        f"{sweep_view.verdict_text(test)}"
    )
    if best.point.below_current:
        st.warning(
            f"The best point wins on the sets taken together but is below the current settings on "
            f"{md(', '.join(best.point.below_current))}.",
            icon=":material/warning:",
        )
    st.caption(f"Validation: {validation.label}.")
    shown_points = [p.settings for p in result.points]
    for block in (validation.by_set, validation.by_corpus):
        if block is None:
            continue
        data = block.to_dict(shown_points)
        st.markdown(f"**{block.label.capitalize()}**: {held_out_caption(data)}.")
        st.dataframe(pd.DataFrame(held_out_rows(data)).rename(columns=metric_label), hide_index=True, width="stretch")
        losers = [r.set_name for r in block.rows if r.loses]
        if losers:
            st.warning(
                f"Chosen without them, the settings lose to the current ones on {md(', '.join(losers))}.",
                icon=":material/warning:",
            )
    if validation.by_set is not None:
        st.caption(PROMISE_NOTE.capitalize() + ", with the support estimate at each point's settings.")
    if saved:
        st.info(
            f"**Current is now the best point**: {md(saved[0])} gives {md(saved[1])}, which the app uses from now on. "
            f"The row *{before.lower()}* shows the settings the sweep measured against; sweep again to compare from here.",
            icon=":material/update:",
        )
    rows = [{"": "best", **best.point.metrics}, {"": before.lower(), **now.metrics}]
    table = sweep_view.points_display(pd.DataFrame(rows, columns=["", *METRIC_NAMES])).set_index("")
    st.table(table.rename(columns=metric_label))


def points_section(result: SweepResult) -> None:
    """Every point on a chart and in a table, and the point each training split chose."""
    names = list(result.grid.names)
    frame = pd.DataFrame(result.rows())
    st.plotly_chart(charts.sweep_figure(frame, names, METRIC), width="stretch")
    with st.expander(f"All {len(result.points)} points; chosen per training split"):
        points = sweep_view.points_display(frame.sort_values(METRIC, ascending=False), tuple(names))
        st.dataframe(points.rename(columns=labelled(list(points.columns))), hide_index=True)
        chosen = [{"settings": settings_text(s), "times": n} for s, n in result.best.chosen]
        st.dataframe(pd.DataFrame(chosen), hide_index=True)


def main() -> None:
    ctx = resources.page_context()
    settings = ctx.settings
    st.title("Sweep")
    st.caption(
        "Every combination of the settings in the grid on every case, against the current settings. With two or more "
        "sets each set is left out in turn: the point is chosen on the other sets and scored on the one it never saw, "
        "which is what a new style of query gets. Records nothing in the invocation store."
    )
    sets = pick_sets(ctx)
    if sets is None:
        return
    picked, eval_sets = sets
    if ctx.store is None or not settings.l1_enabled:
        st.info("A sweep needs L1 (Weaviate and the model): switch L1 on, or reconnect.", icon=":material/info:")
        return
    eval_ui.offer_ingest(ctx, key="ingest_for_sweep")
    form = sweep_form(ctx, eval_sets)
    if form is None:
        return
    points = form.grid.points()
    cases = sum(len(e.cases) for e in eval_sets)
    st.caption(f"{len(points)} points × {cases} cases; {len(keys_for(form.grid, settings))} Weaviate queries per case.")
    render.settings_strip(settings, label="Current settings (what each point is measured against)", key="sweep_current_settings")
    view = eval_ui.run_view(
        settings,
        label=", ".join(picked),
        grid=form.grid_text,
        folds=str(form.folds),
        repeats=str(form.repeats),
        cv=form.cv,
        choose=form.rule,
    )
    if st.button(f"Sweep {len(points)} points", type="primary", key="run_sweep"):
        result = run_sweep(ctx, eval_sets, form)
        if result is None:
            return
        st.session_state[RESULT] = (view, result)
        st.session_state.pop(SAVED, None)
    stored = st.session_state.get(RESULT)
    if stored is None:
        return
    eval_ui.settings_changed(stored[0], view)
    saved = st.session_state.get(SAVED)  # (path, settings) written from this result: "current" is what it was before
    before = "Before the save" if saved else "Current"
    best_section(stored[1], before, saved)
    points_section(stored[1])
    unanswerable = sum(1 for e in eval_sets for c in e.cases if not c.answerable)
    written = sweep_view.save_section(ctx, stored[1], unanswerable)
    if written is not None:
        st.session_state[SAVED] = written
        st.rerun()
    if saved:
        st.success(f"Written: {md(saved[0])}. The app reads it from now on.", icon=":material/check:")


main()
