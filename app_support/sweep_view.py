"""The Sweep page's texts and its save section: the best point written to the settings file."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from retrieval.errors import LookupLabError
from retrieval.evals.settings_strip import value_text
from retrieval.lab.config_file import config_path, plan_config, write_config
from retrieval.lab.sweep import SweepResult

from . import render, resources
from .render import md

METRIC = "mrr@10"


def p_text(test: dict[str, Any]) -> str:
    """The paired test's p value, or '–'."""
    return "–" if test["p_value"] is None else f"{test['p_value']:.3g}"


def verdict_text(test: dict[str, Any]) -> str:
    return "**significant**." if test["significant"] else "not significant."


def estimate_text(result: SweepResult) -> str:
    """The best point's held-out estimate: folds (mean ± sd) or sets (mean, and the worst set)."""
    best = result.best
    if best.cv is not None:
        return f"held-out folds **{best.cv.cv_mean:.3f} ± {best.cv.cv_sd:.3f}** MRR@10 ({best.cv.repeats}×{best.cv.folds} folds)"
    by_set = result.validation.by_set
    worst = by_set.worst if by_set else None
    return f"held-out sets **{best.held_out_mean:.3f}** MRR@10" + (
        f" (worst {md(worst.set_name)} {worst.held_out['mrr@10']:.3f})" if worst else ""
    )


def save_doubts(test: dict[str, Any], unanswerable: int) -> list[str]:
    """Why saving the best point may be a guess: a gain that is not significant, no unanswerable case measured."""
    out = []
    if not test["significant"]:
        out.append(f"The gain is not significant (p = {p_text(test)}): it may be noise in these {test['cases']} cases.")
    if not unanswerable:
        out.append(
            "No unanswerable case was measured: add an unanswerable set to see what these settings do to queries the "
            "corpus cannot answer (unanswerable unsupported)."
        )
    return out


def points_display(frame: pd.DataFrame, settings_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Points as text: settings as written (value_text), metrics with three decimals, '–' where one does not apply."""

    def cell(column: str, value: Any) -> str:
        if value is None or value == "" or (isinstance(value, float) and value != value):
            return "–"
        if column in settings_columns or not isinstance(value, float):
            return value_text(value)
        return f"{value:.3f}"

    return pd.DataFrame({c: [cell(c, v) for v in frame[c]] for c in frame.columns}, index=frame.index)


def save_section(ctx: resources.AppContext, result: SweepResult, unanswerable: int) -> tuple[str, Any] | None:
    """The diff against the settings file, the doubts, and the Write button: (path, settings) once written."""
    best, now, test = result.best, result.current, result.best.vs_current
    target = config_path().resolve()
    st.subheader(f"Save to {target.name}")
    try:
        plan = plan_config(target, best.point.settings)
    except LookupLabError as exc:
        render.error("The settings file cannot be read", exc, "Fix the file named above.")
        return None
    if not plan.changes:
        giver = md(plan.path) if plan.exists else f"The defaults ({md(plan.path)} does not exist)"
        st.caption(f"{giver} already give{'s' if plan.exists else ''} the best settings: nothing to write.")
        return None
    source = md(plan.path) if plan.exists else f"the defaults ({md(plan.path)} does not exist yet)"
    st.markdown(f"Against {source}:")
    st.table(pd.DataFrame([c.to_dict() for c in plan.changes]).astype(str))
    st.code(plan.diff, language="diff")
    for name in plan.overridden_by_env:
        st.warning(f"{md(name)} is set in the environment and wins over the file.", icon=":material/warning:")
    doubts = save_doubts(test, unanswerable)
    st.markdown(
        f"**Before you save**: best − current {test['delta']:+.3f} MRR@10, p = {p_text(test)} "
        f"({verdict_text(test).strip('*.')}); held-out {best.held_out_mean:.3f}. Right and supported "
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
        return None
    if not st.button(f"Write {plan.path}", key="sweep_save", disabled=not sure):
        return None
    try:
        write_config(plan)
    except (LookupLabError, OSError) as exc:
        render.error("Not written", exc, "Look at the new diff and save again.")
        return None
    return str(plan.path), best.point.settings
