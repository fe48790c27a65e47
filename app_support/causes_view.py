"""The misses by cause (retrieval.evals.causes): on Evaluate, the table of causes × configurations and each missed case
with a link that opens it in Lookup with its expected entry explained; on Runs, two runs' causes compared."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from retrieval.config import EVAL_SETTINGS, Settings
from retrieval.core.miss_cause import CAUSES
from retrieval.evals.causes import MISSES, answerable_misses, cause_table
from retrieval.evals.evaluation import EvalReport
from retrieval.lab.compare import RunComparison

from . import keys, resources, urls, why_not_view
from .render import md

# The Lookup settings nearest each configuration's pipeline: Lookup runs the lookup's own pipeline, so the others open
# with the weights that rank by their one list (and a note where the filter differs).
NEAREST: dict[str, tuple[dict[str, Any], str | None]] = {
    "lookup": ({}, None),
    "l0_only": ({"l1_enabled": False}, "L1 off: the L0 matches alone"),
    "l1_filtered": (
        {"search_mode": "near_vector", "l0_weight": 0.0, "name_weight": 0.0},
        "the vector list alone (near_vector, L0 and name weights 0), filtered on the route",
    ),
    "l1_unfiltered": (
        {"search_mode": "near_vector", "l0_weight": 0.0, "name_weight": 0.0},
        "the vector list alone; Lookup filters on the route, so read the trace's unfiltered vector rank",
    ),
    "hybrid": (
        {"search_mode": "hybrid", "l0_weight": 0.0, "name_weight": 0.0},
        "the hybrid list alone; Lookup's hybrid query takes the route's filter, this configuration's did not",
    ),
    "bm25": (
        {"search_mode": "fusion", "vector_weight": 0.0, "l0_weight": 0.0, "name_weight": 0.0},
        "the BM25F list alone (fusion with only the BM25F weight)",
    ),
}


def run_settings(report: EvalReport, settings: Settings) -> Settings:
    """The settings the report ran with (its model, mode, weights, depth and top-k), on the page's corpus; a support
    threshold the run left to the model stays the page's."""
    saved = {k: report.settings[k] for k in EVAL_SETTINGS if k in report.settings and k != "support_threshold"}
    return settings.with_(**saved)


def config_settings(config: str, run: Settings) -> tuple[Settings, str | None]:
    """Lookup's settings for one configuration of a run, and what differs from the configuration (None: nothing)."""
    changes, note = NEAREST.get(config, ({}, f"Lookup runs the lookup's pipeline, not {config}'s"))
    return run.with_(**changes), note


def causes_section(report: EvalReport, settings: Settings) -> None:
    """The misses by cause per configuration, and each missed case with its cause and a link to Lookup that explains it."""
    rows = cause_table(report)
    st.markdown(
        "**Misses by cause**: for each case whose expected entry is not first (and each case with no answer that got "
        "one with support), the first stage that put it below the top."
    )
    # a row per configuration, a column per cause: the few causes wrap their labels, where six configurations as columns
    # would push the last ones off a phone's screen
    frame = pd.DataFrame(rows).set_index("cause").T.astype(str).rename_axis(None, axis=1)
    st.table(frame.rename_axis("configuration").reset_index(), hide_index=True)
    missed_cases(report, settings)


def missed_cases(report: EvalReport, settings: Settings) -> None:
    """Per configuration, its missed cases with their cause, each a link that opens Lookup on the case's query with the
    configuration's settings and `why=` its expected entry."""
    run = run_settings(report, settings)
    base = resources.base_settings()
    for config in report.configs:
        missed = [(c, c.configs[config].miss) for c in report.cases if config in c.configs and c.configs[config].miss]
        if not missed:
            continue
        shown, note = config_settings(config, run)
        with st.expander(f"Missed cases of {config} ({len(missed)})", expanded=config == "lookup", icon=":material/search_off:"):
            if note:
                st.caption(f"Each link opens Lookup (in a new tab) with the settings nearest {md(config)}: {md(note)}.")
            else:
                st.caption("Each link opens Lookup (in a new tab) with the run's settings and the expected entry explained.")
            lines = []
            for case, miss in missed:
                assert miss is not None
                params = urls.lookup_params(case.query, shown, base)
                entry = miss.entry_id  # None: no expected entry in the knowledge base, or a case with no answer
                if entry is not None:
                    params[keys.WHY] = entry
                why = f"why not {md(entry)}" if entry else "open the lookup"
                to = why_not_view.href("", params)
                lines.append(f"- [{md(case.id)}: {md(miss.cause.label)} ({why})]({to}): {md(case.query)}")
            st.markdown("\n".join(lines))


def cause_changes(cmp: RunComparison) -> None:
    """Two runs' misses by cause: the sentence the core makes of them, and the counts of A and of B."""
    if not (cmp.causes_a or cmp.causes_b):
        st.caption("Neither run kept the causes of its misses (runs saved before causes were kept).")
        return
    changes = cmp.cause_changes
    sentence = "; ".join(changes) if changes else "the same misses by cause"
    st.markdown(f"**Misses by cause, B against A** ({md(cmp.config)}): {md(sentence)}")
    rows = [
        {
            "cause": c.label,
            "A": cmp.causes_a.get(str(c), 0),
            "B": cmp.causes_b.get(str(c), 0),
            "B − A": f"{cmp.causes_b.get(str(c), 0) - cmp.causes_a.get(str(c), 0):+d}",
        }
        for c in CAUSES
        if cmp.causes_a.get(str(c)) or cmp.causes_b.get(str(c))
    ]
    total_a, total_b = answerable_misses(cmp.causes_a), answerable_misses(cmp.causes_b)
    rows.append({"cause": MISSES, "A": total_a, "B": total_b, "B − A": f"{total_b - total_a:+d}"})
    st.table(pd.DataFrame(rows).astype({"A": str, "B": str}), hide_index=True)
