"""Judgment coverage on Evaluate: the figure beside the metrics, and how much of a set built from recorded calls
was judged (the per-case mark of an unjudged result is retrieval.evals.report.unjudged_text)."""

from __future__ import annotations

import streamlit as st

from retrieval.evals.coverage import COVERAGE_MEANING, coverage_share, traffic_sentence
from retrieval.evals.evaluation import EvalReport
from retrieval.evals.report import reference_of

from .render import md


def coverage_figure(report: EvalReport) -> None:
    """The reference configuration's judgment coverage as a figure, what it counts, and the traffic sentence."""
    reference = reference_of(report)
    share = coverage_share(report.coverage, reference)
    k = report.coverage.get("k", 10)
    row = st.container(key="eval_coverage", horizontal=True)
    row.metric(
        f"Judgment coverage of {reference}'s top-{k}",
        "unknown" if share is None else f"{share:.0%}",
        help=md(COVERAGE_MEANING),
        width="content",
    )
    counts = (report.coverage.get("configs") or {}).get(reference) or {}
    if not counts:
        row.caption("This run did not measure judgment coverage.")
        return
    unjudged = counts["results"] - counts["judged"]
    words = [
        f"{counts['judged']} of {counts['results']} results carry a judgment; the metrics count the other {unjudged} "
        "(marked *unjudged* in the cases below) as not relevant."
    ]
    if report.coverage.get("judged") == "complete":
        words.append("This set says `judged: complete`: every entry a case does not list is judged not relevant.")
    sentence = traffic_sentence(report.coverage)
    if sentence:
        words.append(f"**{md(sentence)}**")
    row.caption(" ".join(words))
