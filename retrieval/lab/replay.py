"""Replay: recorded invocations (picked with the Invocations page's filters) rerun under the current settings: per call
the top result before and after, and totals. Nothing is recorded unless asked (then under session tag `replay` by
default); a query asked several times is looked up once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.config import QUALITY_SETTINGS, Settings
from retrieval.core.lookup import LookupResult, lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.errors import LookupLabError, StoreError
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
        }


@dataclass(frozen=True)
class ReplayedCall:
    call: RecordedCall
    outcome: str  # changed | unchanged | now_empty | failed
    after: tuple[str, ...] = ()  # entry ids by rank under the current settings
    error: str | None = None
    replay_id: str | None = None  # the new invocation, when the replay was recorded

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

    def __post_init__(self) -> None:
        counts = {o: sum(c.outcome == o for c in self.calls) for o in OUTCOMES}
        counts["calls"] = len(self.calls)
        counts["same_results"] = sum(c.same_results for c in self.calls)
        object.__setattr__(self, "totals", counts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": dict(self.totals),
            "matched": self.matched,
            "lookups": self.lookups,
            "recorded": self.recorded,
            "session_tag": self.session_tag,
            "settings": dict(self.settings),
            "calls": [c.to_dict() for c in self.calls],
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

    def run(con) -> tuple[list[RecordedCall], int]:
        matched = con.execute(f"SELECT count(*) FROM tool_invocation WHERE {where}", params).fetchone()[0]
        rows = con.execute(
            f"SELECT t.id, CAST(timezone('UTC', t.created_at) AS VARCHAR), t.input, t.session_tag, "
            "list(r.entry_id ORDER BY r.rank) FILTER (WHERE r.entry_id IS NOT NULL) "
            f"FROM (SELECT * FROM tool_invocation WHERE {where} ORDER BY created_at DESC, id LIMIT ?) t "
            "LEFT JOIN invocation_result r ON r.invocation_id = t.id "
            "GROUP BY ALL ORDER BY 2 DESC, 1",
            [*params, int(limit)],
        ).fetchall()
        calls = [RecordedCall(str(i), str(at), str(q), str(tag), tuple(ids or ())) for i, at, q, tag, ids in rows]
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
        out.append(ReplayedCall(call, outcome_of(call.results, after), after, replay_id=answer.invocation_id if loud else None))
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
