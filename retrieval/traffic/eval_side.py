"""The eval sets' side of the mix: each case's query looked up as a call would be (unrecorded), binned by the same SQL
as recorded traffic (retrieval.traffic.features), so both sides are counted by one definition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import duckdb
import pyarrow as pa

from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import TrafficError
from retrieval.evals.sets import EvalSet, corpus_fit
from retrieval.traffic.features import FeatureCounts, counts_of, feature_counts_sql, feature_sql, names_entry_of
from retrieval.types.options import LookupOptions


@dataclass(frozen=True)
class CaseCall:
    """What a recorded call of one eval case's query would carry: the query as cleaned, whether it names an entry,
    the L1 filter applied (None: unfiltered or L1 did not run), L0's match, the fallback and the support estimate."""

    query: str
    names_entry: bool
    domain: str | None
    l0_matched: bool
    fallback: bool
    support: float | None


def eval_feature_counts(
    eval_sets: Sequence[EvalSet], services: LookupServices, options: LookupOptions, *, corpus: str | None = None
) -> FeatureCounts:
    """Every case of the sets looked up unrecorded, counted per feature and bin. `corpus` names the services' corpus
    in errors (e.g. its collection). Raises TrafficError for no set, or a set of another corpus (check_corpus)."""
    return bin_calls(case_calls(eval_sets, services, options, corpus=corpus))


def case_calls(
    eval_sets: Sequence[EvalSet], services: LookupServices, options: LookupOptions, *, corpus: str | None = None
) -> list[CaseCall]:
    """Each case of the sets (in order) as the call its query makes; nothing is recorded."""
    if not eval_sets:
        raise TrafficError("no eval set chosen: pick at least one to set beside the traffic")
    for eval_set in eval_sets:
        check_corpus(eval_set, services, corpus)
    queries = [case.query for eval_set in eval_sets for case in eval_set.cases]
    if services.embedder is not None and hasattr(services.embedder, "prime"):
        services.embedder.prime(queries)
    unrecorded = replace(services, recorder=None)
    return [case_call(query, unrecorded, options) for query in queries]


def case_call(query: str, services: LookupServices, options: LookupOptions) -> CaseCall:
    """One query through the tool's own lookup (recorded only if `services` has a recorder)."""
    result = lookup_knowledge(query, services, options)
    return CaseCall(
        query=result.query,
        names_entry=names_entry_of(result.l0),
        domain=result.l1.applied_filter,
        l0_matched=result.l0.has_match,
        fallback=result.fallback,
        support=result.relevance.confidence,
    )


def check_corpus(eval_set: EvalSet, services: LookupServices, corpus: str | None = None) -> None:
    """Refuse a set none of whose expected entries is in the services' corpus. A set with no answerable case expects
    no entry and so names no corpus: it is taken as it is (its queries still have a style)."""
    fit = corpus_fit(eval_set, services.l0.entries)
    if fit.expected and len(fit.missing) == fit.expected:
        where = corpus or f"the corpus searched ({len(services.l0.entries)} entries)"
        declared = f" (it names corpus {eval_set.corpus_dir})" if eval_set.corpus_dir else ""
        raise TrafficError(
            f"{eval_set.path}: eval set {eval_set.name!r} is of another corpus{declared}: none of the {fit.expected} "
            f"entries it expects is in {where}; choose a set of this corpus"
        )


def bin_calls(calls: Sequence[CaseCall]) -> FeatureCounts:
    """The calls counted per feature and bin, by DuckDB over an in-memory frame with the traffic side's SQL."""
    frame = pa.table(
        {
            "query": pa.array([c.query for c in calls], pa.string()),
            "names_entry": pa.array([c.names_entry for c in calls], pa.bool_()),
            "domain": pa.array([c.domain for c in calls], pa.string()),
            "l0_matched": pa.array([c.l0_matched for c in calls], pa.bool_()),
            "fallback": pa.array([c.fallback for c in calls], pa.bool_()),
            "support": pa.array([c.support for c in calls], pa.float64()),
        }
    )
    columns = feature_sql(
        text="query", names_entry="names_entry", domain="domain", l0_matched="l0_matched", fallback="fallback", support="support"
    )
    with duckdb.connect() as con:
        con.register("calls", frame)
        rows = con.execute(feature_counts_sql("calls", columns)).fetchall()
    return counts_of(rows)
