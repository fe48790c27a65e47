"""Replay: recorded invocations (picked with the Invocations page's filters) rerun under the current settings: per call
the top before and after, overlap@k, RBO and the support estimate's change, totals, by domain too. Nothing is recorded
unless asked (then under session tag `replay`); a query asked several times is looked up once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.config import QUALITY_SETTINGS, Settings
from retrieval.core.lookup import LookupResult, lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import LookupLabError, StoreError
from retrieval.lab.rank_overlap import RBO_P, overlap_at_k, rbo
from retrieval.records.call_signals import NO_DOMAIN, signals_sql
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore

OUTCOMES = ("changed", "unchanged", "now_empty", "failed")
REPLAY_TAG = "replay"
DEFAULT_LIMIT = 200
SETTING_FIELDS = ("corpus_dir", "collection", *QUALITY_SETTINGS)  # what was searched, and how


@dataclass(frozen=True)
class RecordedCall:
    """One tool_invocation row as replay needs it: what was asked and what came back (entry ids by rank)."""

    invocation_id: str
    created_at: str
    query: str
    session_tag: str
    results: tuple[str, ...]
    support: float | None = None  # the support estimate the call returned (None: none was made)
    domain: str = NO_DOMAIN  # its top result's domain

    @property
    def top(self) -> str | None:
        return self.results[0] if self.results else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation_id": self.invocation_id,
            "created_at": self.created_at,
            "query": self.query,
            "session_tag": self.session_tag,
            "results": list(self.results),
            "support": self.support,
            "domain": self.domain,
        }


@dataclass(frozen=True)
class ReplayedCall:
    call: RecordedCall
    outcome: str  # changed | unchanged | now_empty | failed
    after: tuple[str, ...] = ()  # entry ids by rank under the current settings
    error: str | None = None
    replay_id: str | None = None  # the new invocation, when the replay was recorded
    support_after: float | None = None  # the support estimate under the current settings

    @property
    def before_top(self) -> str | None:
        return self.call.top

    @property
    def after_top(self) -> str | None:
        return self.after[0] if self.after else None

    @property
    def same_results(self) -> bool:
        """The whole ranked list as before (a top can stay while the rest moves)."""
        return self.outcome != "failed" and self.after == self.call.results

    @property
    def overlap(self) -> float | None:
        """overlap@k, k the longer of the two lists (None when the replay failed)."""
        return None if self.outcome == "failed" else overlap_at_k(self.call.results, self.after)

    @property
    def rbo(self) -> float | None:
        return None if self.outcome == "failed" else rbo(self.call.results, self.after, RBO_P)

    @property
    def support_change(self) -> float | None:
        """The support estimate after less before (None unless both were made)."""
        if self.outcome == "failed" or self.call.support is None or self.support_after is None:
            return None
        return self.support_after - self.call.support

    @property
    def movement(self) -> tuple[float, float]:
        """How far the call moved, largest first when sorted: the ranking (1 - RBO), then the estimate's change."""
        if self.outcome == "failed":
            return (-1.0, 0.0)
        return (1.0 - (self.rbo or 0.0), abs(self.support_change or 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation_id": self.call.invocation_id,
            "created_at": self.call.created_at,
            "query": self.call.query,
            "session_tag": self.call.session_tag,
            "outcome": self.outcome,
            "top_before": self.before_top,
            "top_after": self.after_top,
            "results_before": list(self.call.results),
            "results_after": list(self.after),
            "same_results": self.same_results,
            "domain": self.call.domain,
            "overlap_at_k": _rounded(self.overlap),
            "rbo": _rounded(self.rbo),
            "support_before": self.call.support,
            "support_after": _rounded(self.support_after),
            "support_change": _rounded(self.support_change),
            "error": self.error,
            "replay_id": self.replay_id,
        }


@dataclass(frozen=True)
class ReplayReport:
    calls: tuple[ReplayedCall, ...]
    settings: dict[str, Any]  # the settings the queries were rerun under
    recorded: bool
    session_tag: str | None  # the tag of the recorded replays
    lookups: int  # distinct queries looked up
    matched: int = 0  # calls the filter matched (more than replayed when the limit cut them)
    totals: dict[str, int] = field(init=False)
    figures: dict[str, Any] = field(init=False)  # movement_figures of every call
    by_domain: dict[str, dict[str, Any]] = field(init=False)  # ... of the calls of each recorded top domain

    def __post_init__(self) -> None:
        counts = {o: sum(c.outcome == o for c in self.calls) for o in OUTCOMES}
        counts["calls"] = len(self.calls)
        counts["same_results"] = sum(c.same_results for c in self.calls)
        object.__setattr__(self, "totals", counts)
        object.__setattr__(self, "figures", movement_figures(self.calls))
        domains = sorted({c.call.domain for c in self.calls})
        by_domain = {d: movement_figures([c for c in self.calls if c.call.domain == d]) for d in domains}
        object.__setattr__(self, "by_domain", by_domain)

    def moved_most(self) -> tuple[ReplayedCall, ...]:
        """The calls, those that moved most first (ranking, then estimate); failed replays last."""
        return tuple(sorted(self.calls, key=lambda c: c.movement, reverse=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": dict(self.totals),
            "figures": dict(self.figures),
            "by_domain": {d: dict(f) for d, f in self.by_domain.items()},
            "rbo_p": RBO_P,
            "matched": self.matched,
            "lookups": self.lookups,
            "recorded": self.recorded,
            "session_tag": self.session_tag,
            "settings": dict(self.settings),
            "calls": [c.to_dict() for c in self.moved_most()],
        }


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def movement_figures(calls: Sequence[ReplayedCall]) -> dict[str, Any]:
    """Calls, top changed, mean overlap@k and RBO (over the replays that ran), and the mean change in the support
    estimate and its mean size (over the calls with an estimate both times)."""
    ran = [c for c in calls if c.outcome != "failed"]
    changes = [c.support_change for c in ran if c.support_change is not None]
    return {
        "calls": len(calls),
        "changed": sum(c.outcome in ("changed", "now_empty") for c in calls),
        "overlap_at_k": _mean([c.overlap for c in ran if c.overlap is not None]),
        "rbo": _mean([c.rbo for c in ran if c.rbo is not None]),
        "support_change": _mean(changes),
        "support_change_size": _mean([abs(x) for x in changes]),
        "support_compared": len(changes),
    }


def outcome_of(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """changed / unchanged by the top result; now_empty when results were there and are not any more."""
    if not after:
        return "now_empty" if before else "unchanged"
    if before and before[0] == after[0]:
        return "unchanged"
    return "changed"


def settings_summary(settings: Settings) -> dict[str, Any]:
    return {name: str(v) if name == "corpus_dir" else v for name in SETTING_FIELDS for v in [getattr(settings, name)]}


def recorded_calls(
    store: InvocationStore, flt: InvocationFilter, *, limit: int = DEFAULT_LIMIT
) -> tuple[list[RecordedCall], int]:
    """The newest `limit` calls matching `flt` with their results by rank, and how many calls matched."""
    if limit < 1:
        raise LookupLabError(f"limit {limit}: replay at least one call")
    where, params = flt.where()
    with contextlib.suppress(StoreError):  # what is still in the spool is not replayed
        store.flush(timeout_s=5.0)
    support = signals_sql("t")["support"]

    def run(con) -> tuple[list[RecordedCall], int]:
        matched = con.execute(f"SELECT count(*) FROM tool_invocation WHERE {where}", params).fetchone()[0]
        rows = con.execute(
            f"SELECT t.id, CAST(timezone('UTC', t.created_at) AS VARCHAR), t.input, t.session_tag, "
            "list(r.entry_id ORDER BY r.rank) FILTER (WHERE r.entry_id IS NOT NULL), "
            f"any_value({support}), arg_min(r.domain, r.rank) "
            f"FROM (SELECT * FROM tool_invocation WHERE {where} ORDER BY created_at DESC, id LIMIT ?) t "
            "LEFT JOIN invocation_result r ON r.invocation_id = t.id "
            "GROUP BY t.id, t.created_at, t.input, t.session_tag ORDER BY 2 DESC, 1",
            [*params, int(limit)],
        ).fetchall()
        calls = [
            RecordedCall(str(i), str(at), str(q), str(tag), tuple(ids or ()), sup, dom or NO_DOMAIN)
            for i, at, q, tag, ids, sup, dom in rows
        ]
        return calls, int(matched)

    return store.with_connection(run, read_only=True)


def replay(
    calls: list[RecordedCall],
    services: LookupServices,
    settings: Settings,
    *,
    recorder: InvocationStore | None = None,
    session_tag: str = REPLAY_TAG,
    matched: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Rerun each call's query under `settings`. Records only through `recorder` (with `session_tag`); the
    recorder in `services`, if any, is never used."""
    options = settings.options()
    quiet = replace(services, recorder=None)
    loud = replace(services, recorder=recorder) if recorder is not None else None
    answers: dict[str, LookupResult | LookupLabError] = {}
    out = []
    queries = list(dict.fromkeys(c.query for c in calls))
    for call in calls:
        if call.query not in answers:
            try:
                answers[call.query] = lookup_knowledge(call.query, loud or quiet, options, session_tag=session_tag)
            except LookupLabError as exc:
                answers[call.query] = exc
            if progress is not None:
                progress(len(answers), len(queries))
        answer = answers[call.query]
        if isinstance(answer, LookupLabError):
            out.append(ReplayedCall(call, "failed", error=f"{type(answer).__name__}: {answer}"))
            continue
        after = tuple(r.entry_id for r in answer.results)
        replay_id = answer.invocation_id if loud else None
        out.append(ReplayedCall(call, outcome_of(call.results, after), after, None, replay_id, answer.relevance.confidence))
    if recorder is not None:
        with contextlib.suppress(StoreError):  # the recorded replays in the table now, not a second later
            recorder.flush(timeout_s=5.0)
    return ReplayReport(
        tuple(out),
        settings_summary(settings),
        loud is not None,
        session_tag if loud is not None else None,
        len(answers),
        len(calls) if matched is None else matched,
    )
