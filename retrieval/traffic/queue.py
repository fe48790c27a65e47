"""The judging queue: recorded calls of a window picked for a person to judge next (least sure first, stratified by
domain and query form, or at random), near-duplicate queries collapsed, calls already judged left out."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval.errors import EvalSetError, TrafficError
from retrieval.evals.sets import load_eval_set
from retrieval.lab.judgment_targets import judged_set_files
from retrieval.records.call_signals import NO_DOMAIN, signals_sql
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.features import FORMS, form_sql

# Least sure first: the lowest support estimate first. On the shared sets replayed as traffic it put 10 wrong top
# results among its first 20, the estimate nearest the threshold 3, random picks 2.3 (tests/acceptance/test_traffic_queue.py).
LEAST_SURE, NEAREST, STRATIFIED, RANDOM = "least sure", "nearest the threshold", "stratified", "random"
STRATEGIES = (LEAST_SURE, NEAREST, STRATIFIED, RANDOM)
DEFAULT_TARGET = 20
NEAR = 0.8  # token Jaccard at or above which two queries are the same question asked twice


def query_key_sql(text: str) -> str:
    """A query as near-duplicates share it: lower case, every run of characters other than letters and digits one space."""
    return f"trim(regexp_replace(lower({text}), '[^\\pL\\pN]+', ' ', 'g'))"


@dataclass(frozen=True)
class QueuedCall:
    """One call to judge: the newest of its near-duplicates, how many calls asked it, and why it was picked."""

    invocation_id: str
    query: str
    session_tag: str
    created_at: str
    top_entry_id: str | None
    support: float | None  # the support estimate of its top result (None: none was made)
    threshold: float | None
    domain: str  # the top result's domain (NO_DOMAIN without results)
    form: str  # the query's form (retrieval.traffic.features.FORMS)
    calls: int = 1  # this call and the near-duplicates collapsed into it
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation_id": self.invocation_id,
            "query": self.query,
            "session_tag": self.session_tag,
            "created_at": self.created_at,
            "top_entry_id": self.top_entry_id,
            "support": self.support,
            "threshold": self.threshold,
            "domain": self.domain,
            "form": self.form,
            "calls": self.calls,
            "why": self.why,
        }


@dataclass(frozen=True)
class Queue:
    strategy: str
    target: int
    calls: tuple[QueuedCall, ...]
    window_calls: int  # calls in the window
    collapsed: int  # calls folded into another (the same query, or a near-duplicate)
    judged: int  # calls left out: their query is in a set of the judgments folder

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "target": self.target,
            "window_calls": self.window_calls,
            "collapsed": self.collapsed,
            "judged": self.judged,
            "calls": [c.to_dict() for c in self.calls],
        }


def judged_queries(directory: Path | str) -> tuple[str, ...]:
    """The queries of every eval set in the judgments folder (a set that does not load is passed over)."""
    out: list[str] = []
    for f in judged_set_files(directory):
        try:
            out.extend(c.query for c in load_eval_set(f.path).cases)
        except EvalSetError:
            continue
    return tuple(out)


def window_calls(store: InvocationStore, flt: InvocationFilter, judged: Iterable[str] = ()) -> tuple[list[QueuedCall], int, int]:
    """(the newest call of each distinct query in the window, not judged yet; calls in the window; calls judged)."""
    where, params = flt.where()
    s = signals_sql("t")
    sql = f"""
        WITH w AS (
            SELECT t.id, t.input, t.session_tag, CAST(timezone('UTC', t.created_at) AS VARCHAR) AS at, t.created_at,
                t.top_entry_id, {s["support"]} AS support, {s["threshold"]} AS threshold,
                {form_sql("t.input", s["names_entry"])} AS form, {query_key_sql("t.input")} AS key
            FROM (SELECT * FROM tool_invocation WHERE {where}) t),
        j AS (SELECT DISTINCT {query_key_sql("q")} AS key FROM (SELECT unnest(?::VARCHAR[]) AS q)),
        newest AS (
            SELECT w.*, count(*) OVER (PARTITION BY w.key) AS calls FROM w ANTI JOIN j USING (key)
            QUALIFY row_number() OVER (PARTITION BY w.key ORDER BY w.created_at DESC, w.id DESC) = 1)
        SELECT n.id, n.input, n.session_tag, n.at, n.top_entry_id, n.support, n.threshold,
            coalesce(r.domain, '{NO_DOMAIN}'), n.form, n.calls,
            (SELECT count(*) FROM w), (SELECT count(*) FROM w SEMI JOIN j USING (key))
        FROM newest n LEFT JOIN (
            SELECT invocation_id, arg_min(domain, rank) AS domain FROM invocation_result
            WHERE invocation_id IN (SELECT id FROM newest) GROUP BY invocation_id) r ON r.invocation_id = n.id
        ORDER BY n.created_at DESC, n.id DESC"""
    rows = store.with_connection(lambda con: con.execute(sql, [*params, list(judged)]).fetchall(), read_only=True)
    if not rows:
        return [], *_counts(store, where, params)
    calls = [
        QueuedCall(str(i), str(q), str(tag), str(at), top, sup, thr, str(dom), str(form), int(n))
        for i, q, tag, at, top, sup, thr, dom, form, n, _, _ in rows
    ]
    return calls, int(rows[0][10]), int(rows[0][11])


def _counts(store: InvocationStore, where: str, params: list[Any]) -> tuple[int, int]:
    """Calls in the window, all of them judged (no distinct query was left)."""
    sql = f"SELECT count(*) FROM tool_invocation WHERE {where}"
    row = store.with_connection(lambda con: con.execute(sql, params).fetchone(), read_only=True)
    n = int(row[0]) if row else 0
    return n, n


def build_queue(
    store: InvocationStore,
    flt: InvocationFilter,
    *,
    strategy: str = LEAST_SURE,
    target: int = DEFAULT_TARGET,
    judged: Iterable[str] = (),
    seed: int = 0,
    first: Sequence[str] = (),
) -> Queue:
    """The calls of the window `flt` to judge next, up to `target`; `first`: invocation ids put ahead of the strategy's
    order (e.g. the calls a replay moved most); `judged`: queries already judged, left out."""
    if strategy not in STRATEGIES:
        raise TrafficError(f"strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    if target < 1:
        raise TrafficError(f"target {target}: queue at least one call")
    calls, in_window, judged_calls = window_calls(store, flt, judged)
    if in_window == 0:
        raise TrafficError(f"the window ({flt.where()[0]}) holds no recorded call: widen it")
    ordered = _ordered(calls, strategy, seed)
    ahead = {i: n for n, i in enumerate(first)}
    pinned = sorted((c for c in ordered if c.invocation_id in ahead), key=lambda c: ahead[c.invocation_id])
    ordered = [replace(c, why="moved most in the replay") for c in pinned] + [c for c in ordered if c.invocation_id not in ahead]
    kept, folded = collapse(ordered, target)
    collapsed = sum(c.calls for c in calls) - len(calls) + folded
    return Queue(strategy, target, tuple(kept), in_window, collapsed, judged_calls)


def _ordered(calls: list[QueuedCall], strategy: str, seed: int) -> list[QueuedCall]:
    """The calls in the strategy's order, each saying why it is where it is; calls without an estimate come last in
    the two support orders (nothing says how sure the tool was)."""
    if strategy == RANDOM:
        shuffled = list(calls)
        random.Random(seed).shuffle(shuffled)
        return [replace(c, why=f"random (seed {seed})") for c in shuffled]
    if strategy == STRATIFIED:
        return _stratified(calls, seed)
    with_estimate = [c for c in calls if c.support is not None]
    if strategy == NEAREST:
        with_estimate.sort(key=_distance)
        picked = [replace(c, why=f"estimate {c.support:.2f}, {_distance(c):.2f} from the threshold") for c in with_estimate]
    else:
        with_estimate.sort(key=lambda c: c.support or 0.0)
        picked = [replace(c, why=f"estimate {c.support:.2f}") for c in with_estimate]
    return picked + [replace(c, why="no support estimate") for c in calls if c.support is None]


def _distance(call: QueuedCall) -> float:
    """How far the call's estimate is from its threshold (0.5 where none was recorded)."""
    cut = 0.5 if call.threshold is None else call.threshold
    return abs((call.support or 0.0) - cut)


def _stratified(calls: list[QueuedCall], seed: int) -> list[QueuedCall]:
    """Round-robin over the strata (top domain × query form), the largest stratum first; at random within each."""
    strata: dict[tuple[str, str], list[QueuedCall]] = {}
    for c in calls:
        strata.setdefault((c.domain, c.form), []).append(c)
    rng = random.Random(seed)
    for members in strata.values():
        rng.shuffle(members)
    order = sorted(strata, key=lambda k: (-len(strata[k]), k[0], FORMS.index(k[1]) if k[1] in FORMS else len(FORMS)))
    out: list[QueuedCall] = []
    for depth in range(max((len(m) for m in strata.values()), default=0)):
        for key in order:
            if depth < len(strata[key]):
                out.append(replace(strata[key][depth], why=f"stratum {key[0]} · {key[1]}"))
    return out


def _token_set(query: str) -> frozenset[str]:
    return frozenset("".join(ch if ch.isalnum() else " " for ch in query.lower()).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def collapse(ordered: Sequence[QueuedCall], target: int, near: float = NEAR) -> tuple[list[QueuedCall], int]:
    """The first `target` calls of `ordered` that are not near-duplicates (token Jaccard >= `near`) of one kept before,
    each standing for its near-duplicates (the newest of them, counted); and how many calls were folded in."""
    kept: list[QueuedCall] = []
    tokens: list[frozenset[str]] = []
    folded = 0
    for call in ordered:
        mine = _token_set(call.query)
        twin = next((i for i, t in enumerate(tokens) if jaccard(mine, t) >= near), None)
        if twin is None:
            if len(kept) < target:
                kept.append(call)
                tokens.append(mine)
            continue
        folded += 1  # its own same-query calls are counted already
        rep = kept[twin]
        newest = call if call.created_at > rep.created_at else rep
        kept[twin] = replace(newest, calls=rep.calls + call.calls, why=rep.why)
    return kept, folded
