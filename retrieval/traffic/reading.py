"""Recorded traffic read from tool_invocation's typed columns in DuckDB: the window's feature counts (the bins of
retrieval.traffic.features) and the sums the label-free estimate needs, per day, session tag and domain, in SQL."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb

from retrieval.errors import LookupLabError, TrafficError
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic import features as f

YES, NO = f.YES, f.NO
NO_RESULT = "(no result)"  # the domain of a call that returned nothing
GROUPINGS = ("day", "session_tag", "domain")  # what the estimate is broken down by (domain: the top result's)
T = TypeVar("T")


@dataclass(frozen=True)
class Window:
    """Which calls: an InvocationFilter (time, session tags, ...) and optionally the collection they searched."""

    flt: InvocationFilter = field(default_factory=InvocationFilter)
    collection: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        sql, params = self.flt.where()
        if self.collection:
            return f"({sql}) AND {f.COLLECTION} = ?", [*params, self.collection]
        return sql, params

    def describe(self) -> str:
        """The window in words, for an error or a caption."""
        flt = self.flt
        parts = [
            f"since {flt.since.isoformat()}" if flt.since else "",
            f"until {flt.until.isoformat()}" if flt.until else "",
            f"session tag {', '.join(flt.session_tags)}" if flt.session_tags else "",
            f"collection {self.collection}" if self.collection else "",
            f"text '{flt.text}'" if flt.text.strip() else "",
        ]
        return ", ".join(p for p in parts if p) or "every call"


@dataclass(frozen=True)
class SupportSums:
    """One group of calls (a day, a session tag, a domain; "" for them all): what the estimate is made of."""

    key: str
    calls: int
    estimated: int  # calls that carry a support estimate
    support_sum: float
    support_sq_sum: float
    chance_var_sum: float  # sum of p(1-p) over the estimated calls
    unsupported: int  # calls answered without semantic support
    fallbacks: int
    fits: tuple[str, ...]  # the support fits the estimates read

    @property
    def no_estimate(self) -> int:
        return self.calls - self.estimated

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "calls": self.calls,
            "estimated": self.estimated,
            "support_sum": self.support_sum,
            "support_sq_sum": self.support_sq_sum,
            "chance_var_sum": self.chance_var_sum,
            "unsupported": self.unsupported,
            "fallbacks": self.fallbacks,
            "no_estimate": self.no_estimate,
            "fits": list(self.fits),
        }


@dataclass(frozen=True)
class TrafficSums:
    overall: SupportSums
    per_day: tuple[SupportSums, ...]  # oldest first, key an ISO date (UTC)
    per_tag: tuple[SupportSums, ...]
    per_domain: tuple[SupportSums, ...]  # by the top result's domain


def _read(store: InvocationStore, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    with contextlib.suppress(LookupLabError):  # rows still in the spool show on a later read
        store.flush(timeout_s=2.0)
    return store.with_connection(fn, read_only=True)


def _checked(con: duckdb.DuckDBPyConnection, store: InvocationStore, window: Window) -> None:
    """Raise TrafficError for a store with no calls, an unknown session tag or collection, or an empty window."""
    row = con.execute("SELECT coalesce(sum(calls), 0) FROM invocation_hourly").fetchone()
    if not row or not row[0]:
        raise TrafficError(f"{store.db_path}: the invocation store holds no calls yet")
    if window.flt.session_tags:
        known = [r[0] for r in con.execute("SELECT DISTINCT session_tag FROM tool_invocation ORDER BY 1").fetchall()]
        unknown = [t for t in window.flt.session_tags if t not in known]
        if unknown:
            raise TrafficError(f"session tag {', '.join(map(repr, unknown))} has no calls; the tags recorded: {', '.join(known)}")
    if window.collection:
        sql = f"SELECT DISTINCT {f.COLLECTION} FROM tool_invocation WHERE {f.COLLECTION} IS NOT NULL ORDER BY 1"
        known = [r[0] for r in con.execute(sql).fetchall()]
        if window.collection not in known:
            raise TrafficError(
                f"collection {window.collection!r} has no calls; the collections recorded: {', '.join(known) or 'none'}"
            )
    where, params = window.where()
    count = con.execute(f"SELECT count(*) FROM tool_invocation WHERE {where}", params).fetchone()
    if not count or not count[0]:
        raise TrafficError(f"no calls in the window ({window.describe()})")


# each feature's bin of a row, in FEATURES' order: the SQL the eval side bins its cases with
_BIN_SQL = f.feature_sql(
    text="input",
    names_entry=f.NAMES_ENTRY,
    domain="nullif(domain, '')",
    l0_matched=f.L0_MATCHED,
    fallback="fallback",
    support=f.SUPPORT,
)
_FIXED_BINS = {  # the bins every count lists, zero or not (a domain is listed when calls went there)
    "query_words": [f.word_bin_label(low, high) for low, high in f.WORD_BINS],
    "query_form": list(f.FORMS),
    "filtered": [YES, NO],
    "l0_match": [YES, NO],
    "fallback": [YES, NO],
    "support": [f.support_bin_label(i) for i in range(len(f.SUPPORT_EDGES) - 1)] + [f.NO_ESTIMATE],
}


def traffic_feature_counts(store: InvocationStore, flt: InvocationFilter, collection: str | None = None) -> f.FeatureCounts:
    """The calls of the window counted per feature and bin, in one scan (the bins of every feature grouped together,
    then summed per feature). Raises TrafficError for no calls, an unknown tag or an empty window."""
    window = Window(flt, collection)
    where, params = window.where()
    bins = ", ".join(f"{sql} AS {name}" for name, sql in _BIN_SQL.items())

    def run(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
        _checked(con, store, window)
        sql = f"SELECT {', '.join(_BIN_SQL)}, count(*) FROM (SELECT {bins} FROM tool_invocation WHERE {where}) GROUP BY ALL"
        return con.execute(sql, params).fetchall()

    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(_FIXED_BINS.get(name, []), 0) for name in f.FEATURES}
    for *labels, n in _read(store, run):
        for name, label in zip(f.FEATURES, labels, strict=True):
            counts[name][str(label)] = counts[name].get(str(label), 0) + int(n)
    return counts


_SUMS = (
    "count(*), count(support), coalesce(sum(support), 0), coalesce(sum(support * support), 0), "
    "coalesce(sum(support * (1 - support)), 0), count(*) FILTER (WHERE NOT coalesce(supported, false)), "
    "count(*) FILTER (WHERE fallback), list(DISTINCT support_fit ORDER BY support_fit) FILTER (WHERE support_fit IS NOT NULL)"
)
_GROUPING_BITS = {7: "", 3: "day", 5: "session_tag", 6: "domain"}
_KEYS = {
    "day": "CAST(timezone('UTC', created_at) AS DATE)",  # a DATE: str() of it, the ISO day, made once per day
    "session_tag": "session_tag",
    "domain": f"coalesce(nullif({f.TOP_DOMAIN}, ''), '{NO_RESULT}')",
}


def traffic_sums(store: InvocationStore, flt: InvocationFilter, collection: str | None = None) -> TrafficSums:
    """The estimate's sums over the window: overall, per day (UTC), per session tag and per top result's domain, in
    one scan (GROUPING SETS). Raises TrafficError for no calls, an unknown tag or an empty window."""
    window = Window(flt, collection)
    where, params = window.where()
    keys = ", ".join(f"{sql} AS {name}" for name, sql in _KEYS.items())

    def run(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
        _checked(con, store, window)
        sql = (
            f"SELECT grouping(day, session_tag, domain) AS g, day, session_tag, domain, {_SUMS} FROM "
            f"(SELECT {keys}, support, supported, support_fit, fallback FROM tool_invocation WHERE {where}) "
            "GROUP BY GROUPING SETS ((), (day), (session_tag), (domain)) ORDER BY g, day, session_tag, domain"
        )
        return con.execute(sql, params).fetchall()

    groups: dict[str, list[SupportSums]] = {"": [], **{name: [] for name in GROUPINGS}}
    for g, day, tag, domain, *sums in _read(store, run):
        grouping = _GROUPING_BITS[int(g)]  # grouping(): a bit set for each key column the set leaves out
        key = {"": "", "day": day, "session_tag": tag, "domain": domain}[grouping]
        groups[grouping].append(_sums(str(key), sums))
    per_domain = sorted(groups["domain"], key=lambda s: (-s.calls, s.key))
    return TrafficSums(groups[""][0], tuple(groups["day"]), tuple(groups["session_tag"]), tuple(per_domain))


def _sums(key: str, row: list[Any]) -> SupportSums:
    calls, estimated, total, squares, chance_var, unsupported, fallbacks, fits = row
    return SupportSums(
        key, int(calls), int(estimated), float(total), float(squares), float(chance_var), int(unsupported), int(fallbacks),
        tuple(fits or ()),
    )  # fmt: skip


def traffic_collections(store: InvocationStore) -> tuple[str, ...]:
    """The collections the recorded calls searched (rows from before the collection was recorded name none)."""
    sql = f"SELECT DISTINCT {f.COLLECTION} FROM tool_invocation WHERE {f.COLLECTION} IS NOT NULL ORDER BY 1"
    return tuple(str(r[0]) for r in _read(store, lambda con: con.execute(sql).fetchall()))
