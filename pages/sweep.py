"""Sweep: a grid of settings over eval sets, chosen by cross-validation (retrieval.lab.sweep); save the best."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_support import charts, eval_ui, jobs, render, resources
from app_support.render import md
from retrieval.errors import LookupLabError
from retrieval.evals.sets import load_eval_set
from retrieval.evals.settings_strip import value_text
from retrieval.evals.tuning import parse_grid
from retrieval.lab.config_file import config_path, plan_config, write_config
from retrieval.lab.sweep import SweepResult, check_folds, cv_for, fitting_eval_sets, keys_for, sweep_sets
from retrieval.lab.sweep_report import PROMISE_NOTE, held_out_caption, held_out_rows, settings_text

SETS, GRID, FOLDS, REPEATS, RESULT, SAVED = "sweep_sets", "sweep_grid", "sweep_folds", "sweep_repeats", "_sweep", "_sweep_saved"
CV, CHOOSE = "sweep_cv", "sweep_choose"
CV_LABELS = {"sets": "Leave one set out (and one corpus out)", "kfold": "Stratified k-fold"}
CHOOSE_LABELS = {"mean": "Mean of the sets", "worst": "Worst set"}
DEFAULT_GRID = "vector_weight=1,2,3,4;l0_weight=0,0.1,0.2"
METRIC = "mrr@10"


def save_doubts(test: dict, unanswerable: int) -> list[str]:
    """Why saving the best point may be a guess: a gain that is not significant, no unanswerable case measured."""
    out = []
    if not test["significant"]:
        p = "–" if test["p_value"] is None else f"{test['p_value']:.3g}"
        out.append(f"The gain is not significant (p = {p}): it may be noise in these {test['cases']} cases.")
    if not unanswerable:
        out.append(
            "No unanswerable case was measured: add an unanswerable set to see what these settings do to queries the "
            "corpus cannot answer (unanswerable unsupported)."
        )
    return out


def points_display(frame: pd.DataFrame, settings_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Points as text: settings as written (value_text), metrics with three decimals, '–' where one does not apply."""

    def cell(column: str, value) -> str:
        if value is None or value == "" or (isinstance(value, float) and value != value):
            return "–"
        if column in settings_columns or not isinstance(value, float):
            return value_text(value)
        return f"{value:.3f}"

    return pd.DataFrame({c: [cell(c, v) for v in frame[c]] for c in frame.columns}, index=frame.index)


ctx = resources.page_context()
settings = ctx.settings

st.title("Sweep")
st.caption(
    "Every combination of the settings in the grid on every case, against the current settings. With two or more "
    "sets each set is left out in turn: the point is chosen on the other sets and scored on the one it never saw, "
    "which is what a new style of query gets. Records nothing in the invocation store."
)
known = [e.entry_id for e in ctx.corpus.entries]
files = fitting_eval_sets(eval_ui.known_set_files(settings), known, settings.corpus_dir)
if not files:
    st.info("No eval set fits the loaded corpus: pick another corpus in the sidebar, or add a set to eval_sets/.")
    st.stop()
labels = [f.label for f in files]
picked = st.multiselect(
    "Eval sets (those that fit the loaded corpus)",
    labels,
    default=[labels[eval_ui.preselected(files, ctx)]],
    key=f"{SETS}-{settings.collection}",  # per corpus: another corpus has other sets
)
if not picked:
    st.info("Pick one or more eval sets.")
    st.stop()
eval_ui.remember(ctx, picked[-1])
eval_sets = [load_eval_set(f.path, known_ids=known) for f in files if f.label in picked]
if ctx.store is None or not settings.l1_enabled:
    st.info("A sweep needs L1 (Weaviate and the model): switch L1 on, or reconnect.", icon=":material/info:")
    st.stop()
eval_ui.offer_ingest(ctx, key="ingest_for_sweep")

grid_text = st.text_input(
    "Grid",
    value=DEFAULT_GRID,
    key=GRID,
    help="NAME=V1,V2;NAME=… over top_k, search_mode, hybrid_alpha, vector_weight, lexical_weight, l0_weight, name_weight, "
    "support_threshold (as `python -m retrieval sweep --grid`).",
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
    help="Leave one set out chooses the point on the other sets and scores the set left out (it needs two answerable "
    "sets). Stratified k-fold mixes every set into every training fold: it measures new queries of the styles seen.",
)
rule = second.radio("Choose by", list(CHOOSE_LABELS), format_func=CHOOSE_LABELS.get, key=CHOOSE)
folds = int(third.number_input("Folds", min_value=2, max_value=10, value=5, key=FOLDS, disabled=cv != "kfold"))
repeats = int(fourth.number_input("Repeats", min_value=1, max_value=20, value=3, key=REPEATS, disabled=cv != "kfold"))
try:
    grid = parse_grid(grid_text, settings)
    check_folds(eval_sets, folds, repeats, cv)
except LookupLabError as exc:
    render.error("The sweep cannot run", exc, "Fix the grid or the folds named above.")
    st.stop()
cases = sum(len(e.cases) for e in eval_sets)
points = grid.points()
st.caption(f"{len(points)} points × {cases} cases; {len(keys_for(grid, settings))} Weaviate queries per case.")
render.settings_strip(settings, label="Current settings (what each point is measured against)", key="sweep_current_settings")
view = eval_ui.run_view(
    settings, label=", ".join(picked), grid=grid_text.strip(), folds=str(folds), repeats=str(repeats), cv=cv, choose=rule
)
if st.button(f"Sweep {len(points)} points", type="primary", key="run_sweep"):

    def sweep(bar: jobs.JobBar) -> SweepResult:
        # a grid over embedding_model searches each model's own collection of this corpus (ingest it on Corpus first)
        models = {k.model for k in keys_for(grid, settings)} - {settings.embedding_model}
        others = {m: resources.context(settings.with_(embedding_model=m)).lookup_services(record=False) for m in models}
        services = ctx.lookup_services(record=False)
        return sweep_sets(
            eval_sets,
            services,
            settings,
            grid,
            cv=cv,
            choose=rule,
            folds=folds,
            repeats=repeats,
            progress=bar.stages,
            other_models=others,
        )

    result = jobs.run_job(
        "The sweep stopped",
        sweep,
        fix="Fix what it names (see the sidebar status) and run it again.",
        when_down="Check that Weaviate is up (Retry connection) and run it again.",
        start="sweeping…",
    )
    if result is None:
        st.stop()
    st.session_state[RESULT] = (view, result)
    st.session_state.pop(SAVED, None)

stored = st.session_state.get(RESULT)
if stored is None:
    st.stop()
eval_ui.settings_changed(stored[0], view)
result = stored[1]
best, now, test = result.best, result.current, result.best.vs_current
names = list(result.grid.names)

saved = st.session_state.get(SAVED)  # (path, settings) written from this result: "current" is what it was before
before = "Before the save" if saved else "Current"
st.subheader("Best against current")
p = "–" if test["p_value"] is None else f"{test['p_value']:.3g}"
verdict = "**significant**." if test["significant"] else "not significant."
validation = result.validation
if best.cv is not None:
    estimate = f"held-out folds **{best.cv.cv_mean:.3f} ± {best.cv.cv_sd:.3f}** mrr@10 ({best.cv.repeats}×{best.cv.folds} folds)"
else:
    worst = validation.by_set.worst if validation.by_set else None
    estimate = f"held-out sets **{best.held_out_mean:.3f}** mrr@10" + (
        f" (worst {md(worst.set_name)} {worst.held_out['mrr@10']:.3f})" if worst else ""
    )
st.markdown(
    f"**Best** `{settings_text(best.point.settings)}`: {estimate}, in-sample {best.point.metrics[METRIC]:.3f}.  \n"
    f"**{before}** `{settings_text(now.settings)}`: mrr@10 {now.metrics[METRIC]:.3f}. Best − current {test['delta']:+.3f}, "
    f"p = {p} (paired t-test over {test['cases']} cases): {verdict}"
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
    frame_held = pd.DataFrame(held_out_rows(data))
    st.dataframe(frame_held, hide_index=True, width="stretch")
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
shown = ["mrr@10", "hit@1", "recall@5", "correct_supported_rate", "unanswerable_unsupported_rate"]
st.table(
    points_display(
        pd.DataFrame([{"": "best", **best.point.metrics}, {"": before.lower(), **now.metrics}], columns=["", *shown])
    ).set_index("")
)
unanswerable = sum(1 for e in eval_sets for c in e.cases if not c.answerable)

frame = pd.DataFrame(result.rows())
st.plotly_chart(charts.sweep_figure(frame, names, METRIC), width="stretch")
with st.expander(f"All {len(result.points)} points; chosen per training split"):
    st.dataframe(points_display(frame.sort_values(METRIC, ascending=False), tuple(names)), hide_index=True)
    st.dataframe(pd.DataFrame([{"settings": settings_text(s), "times": n} for s, n in best.chosen]), hide_index=True)

target = config_path().resolve()
st.subheader(f"Save to {target.name}")
try:
    plan = plan_config(target, best.point.settings)
except LookupLabError as exc:
    render.error("The settings file cannot be read", exc, "Fix the file named above.")
    st.stop()
if not plan.changes:
    giver = md(plan.path) if plan.exists else f"The defaults ({md(plan.path)} does not exist)"
    st.caption(f"{giver} already give{'s' if plan.exists else ''} the best settings: nothing to write.")
else:
    source = md(plan.path) if plan.exists else f"the defaults ({md(plan.path)} does not exist yet)"
    st.markdown(f"Against {source}:")
    st.table(pd.DataFrame([c.to_dict() for c in plan.changes]).astype(str))
    st.code(plan.diff, language="diff")
    for name in plan.overridden_by_env:
        st.warning(f"{md(name)} is set in the environment and wins over the file.", icon=":material/warning:")
    doubts = save_doubts(test, unanswerable)
    st.markdown(
        f"**Before you save**: best − current {test['delta']:+.3f} mrr@10, p = {p} ({verdict.strip('*.')}); "
        f"held-out {best.held_out_mean:.3f}. Right and supported "
        f"{render.rate(best.point.metrics.get('correct_supported_rate'))} (now "
        f"{render.rate(now.metrics.get('correct_supported_rate'))}); unanswerable left unsupported "
        f"{render.rate(best.point.metrics.get('unanswerable_unsupported_rate'))} (now "
        f"{render.rate(now.metrics.get('unanswerable_unsupported_rate'))}, on {unanswerable} unanswerable cases)."
    )
    for doubt in doubts:
        st.warning(md(doubt), icon=":material/help:")
    sure = not doubts or st.checkbox("Save anyway", key="sweep_save_anyway")
    if ctx.read_only:
        st.caption(f"Writing is off: the app is read-only ({md(ctx.access.reason)}).")
    elif st.button(f"Write {plan.path}", key="sweep_save", disabled=not sure):
        try:
            write_config(plan)
        except (LookupLabError, OSError) as exc:
            render.error("Not written", exc, "Look at the new diff and save again.")
            st.stop()
        st.session_state[SAVED] = (str(plan.path), best.point.settings)
        st.rerun()
if saved:
    st.success(f"Written: {md(saved[0])}. The app reads it from now on.", icon=":material/check:")
