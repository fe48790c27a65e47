"""Read-only SQL over the invocation store: one SELECT (or EXPLAIN), a row limit and a time limit."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from retrieval.errors import SqlRefused, StoreError
from retrieval.records.db_budget import duckdb_frames, is_memory_error
from retrieval.records.invocations import InvocationStore

CONSOLE_MEMORY_LIMIT = "256MB"  # the console's budget, below the store's: a query of anyone who reaches the app
ALLOWED = {duckdb.StatementType.SELECT: "SELECT", duckdb.StatementType.EXPLAIN: "EXPLAIN"}
SAFE_CONFIG = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}
EXAMPLES = {
    "Calls per layer": "SELECT layer, count(*) AS calls FROM tool_invocation GROUP BY layer ORDER BY calls DESC",
    "Fallbacks with their L1 error": (
        "SELECT created_at, input, l1_status, error FROM tool_invocation WHERE fallback ORDER BY created_at DESC"
    ),
    "Slowest calls": "SELECT input, latency_ms, layer FROM tool_invocation ORDER BY latency_ms DESC LIMIT 20",
    "L0 domains per call": (
        "SELECT input, retrieval_details->'l0'->'domains' AS l0_domains, retrieval_details->'l1'->'filter' AS l1_filter "
        "FROM tool_invocation ORDER BY created_at DESC LIMIT 50"
    ),
    "Top result per domain": "SELECT domain, top_entry_id, count(*) AS n FROM tool_invocation GROUP BY ALL ORDER BY n DESC",
    "Entries returned most (any rank)": (
        "SELECT entry_id, count(*) AS calls, avg(rank) AS mean_rank, avg(score) AS mean_score FROM invocation_result "
        "GROUP BY entry_id ORDER BY calls DESC LIMIT 20"
    ),
    "Keywords that led to a fallback": (
        "SELECT k.term, k.field, count(*) AS calls FROM invocation_keyword k JOIN tool_invocation t "
        "ON t.id = k.invocation_id WHERE t.fallback GROUP BY ALL ORDER BY calls DESC LIMIT 20"
    ),
    "Stage latency p95 per layer": (
        "SELECT layer, quantile_cont(l0_ms, 0.95) AS l0_p95, quantile_cont(embed_ms, 0.95) AS embed_p95, "
        "quantile_cont(l1_ms, 0.95) AS l1_p95 FROM tool_invocation GROUP BY layer"
    ),
}


@dataclass(frozen=True)
class SqlResult:
    frame: pd.DataFrame
    truncated: bool
    elapsed_ms: float


_SELECT_START = {"SELECT", "WITH", "VALUES", "FROM", "TABLE", "(", "SUMMARIZE", "DESCRIBE", "SHOW"}


def _explained_statement(text: str) -> str | None:
    """The statement an EXPLAIN wraps: `EXPLAIN [ANALYZE] [VERBOSE] [(options)] stmt`; None if unsure."""
    try:
        tokens = [pos for pos, kind in duckdb.tokenize(text) if kind != duckdb.token_type.comment]
    except duckdb.Error:
        return None

    def word(i: int) -> str:
        m = re.match(r"[A-Za-z_]+", text[tokens[i] :])
        return m.group(0).upper() if m else text[tokens[i]]

    if not tokens or word(0) != "EXPLAIN":
        return None
    i = 1
    if i < len(tokens) and word(i) in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and word(i) == "VERBOSE":
        i += 1
    if i + 1 < len(tokens) and word(i) == "(" and word(i + 1) not in _SELECT_START:
        depth = 0  # an option list such as (FORMAT json, ANALYZE): skip to its closing parenthesis
        for j in range(i, len(tokens)):
            depth += {"(": 1, ")": -1}.get(text[tokens[j]], 0)
            if depth == 0:
                i = j + 1
                break
        else:
            return None
    return text[tokens[i] :] if i < len(tokens) else None


def check_statement(sql: str) -> str:
    """Refuse anything but exactly one SELECT, or an EXPLAIN of one SELECT. Returns the statement kind."""
    if not sql or not sql.strip():
        raise SqlRefused("the statement is empty: write one SELECT")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlRefused(f"the statement does not parse: {exc}") from exc
    if not statements:
        raise SqlRefused("the statement is empty (only comments or semicolons): write one SELECT")
    if len(statements) != 1:
        raise SqlRefused(f"one statement at a time: found {len(statements)}")
    kind = statements[0].type
    if kind not in ALLOWED:
        raise SqlRefused(f"read-only console: {kind.name} statements are refused; only SELECT or EXPLAIN run here")
    if kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs the statement it wraps: CREATE TEMP TABLE or CHECKPOINT would pass
        # the read-only connection, so the wrapped statement must itself be one SELECT.
        inner = _explained_statement(statements[0].query)
        try:
            inner_statements = duckdb.extract_statements(inner) if inner else []
        except duckdb.Error:
            inner_statements = []
        if len(inner_statements) != 1 or inner_statements[0].type != duckdb.StatementType.SELECT:
            what = inner_statements[0].type.name if len(inner_statements) == 1 else "a statement that is not one SELECT"
            raise SqlRefused(f"read-only console: EXPLAIN of {what} is refused; only EXPLAIN of a SELECT runs here")
    return ALLOWED[kind]


def _plain(value):
    """numpy arrays in LIST columns (and inside STRUCTs) as Python lists, as fetchall() would give."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _fetch_frame(cur: duckdb.DuckDBPyConnection, limit: int) -> pd.DataFrame:
    """Up to `limit` rows of a streaming result, a chunk of 2048 rows at a time. Not fetchmany(): its Python objects need
    pytz (not installed) for every TIMESTAMPTZ value, such as tool_invocation.created_at."""
    names = [d[0] for d in cur.description or []]
    chunks, have = [], 0
    while have < limit:
        chunk = cur.fetch_df_chunk(max(1, -(-(limit - have) // 2048)))
        if len(chunk) == 0:
            break
        chunks.append(chunk)
        have += len(chunk)
    if not chunks:
        return pd.DataFrame(columns=names)
    frame = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        missing = column.isna()
        if missing.any():  # SQL NULL as None (JSON null), not NaN / NaT / pd.NA
            column = column.astype(object).where(~missing, None)
        if column.dtype == object:  # built by hand: Series.map would infer str dtype and turn None into NaN
            column = pd.Series([_plain(v) for v in column], index=column.index, dtype=object, name=column.name)
        frame.isetitem(i, column)  # type: ignore[arg-type]  # pandas-stubs leave Series out of isetitem's values
    return frame


def run_readonly(
    store: InvocationStore,
    sql: str,
    *,
    row_limit: int = 10_000,
    timeout_ms: int = 5_000,
    memory_limit: str = CONSOLE_MEMORY_LIMIT,
) -> SqlResult:
    """Run one checked statement on a read-only connection with external access off, within `memory_limit`
    (or the store's own budget if smaller) and without spilling to disk: a query over it is refused."""
    check_statement(sql)
    budget = store.budget.with_memory_limit(memory_limit)
    config = dict(SAFE_CONFIG, max_execution_time=int(timeout_ms)) if timeout_ms else dict(SAFE_CONFIG)

    def run(con: duckdb.DuckDBPyConnection) -> SqlResult:
        t0 = time.perf_counter()
        cur = con.cursor()
        try:
            cur.execute(sql)
            with duckdb_frames():
                frame = _fetch_frame(cur, row_limit + 1)
        except duckdb.InterruptException as exc:
            if timeout_ms and "execution time" in str(exc):
                raise SqlRefused(
                    f"the query was stopped at the time limit of {int(timeout_ms)} ms: "
                    "narrow it (WHERE, LIMIT) or raise the time limit"
                ) from exc
            raise SqlRefused(f"{type(exc).__name__}: {exc}") from exc
        except duckdb.Error as exc:
            if is_memory_error(exc):
                raise SqlRefused(
                    f"the query went over the memory budget of {budget.memory_limit} and was stopped: "
                    "narrow it (WHERE, LIMIT, fewer or shorter columns) or aggregate before sorting"
                ) from exc
            raise SqlRefused(f"{type(exc).__name__}: {exc}") from exc
        finally:
            cur.close()
        truncated = len(frame) > row_limit
        frame = frame.iloc[:row_limit].reset_index(drop=True)
        return SqlResult(frame, truncated, (time.perf_counter() - t0) * 1000)

    try:
        return store.with_connection(run, read_only=True, config=config, budget=budget, spill=False)
    except StoreError:
        raise
