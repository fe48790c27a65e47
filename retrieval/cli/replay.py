"""`python -m retrieval replay`: recorded invocations rerun under the current settings (retrieval.lab.replay)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from retrieval.cli.errors import fail, reported
from retrieval.cli.options import ConfigOpt, CorpusOpt, json_option
from retrieval.config import db_budget, load_settings
from retrieval.lab.rank_overlap import RBO_P

if TYPE_CHECKING:
    from retrieval.lab.replay import ReplayReport

OUTCOME_MARK = {"changed": "≠", "unchanged": "=", "now_empty": "∅", "failed": "!"}


def register(app: typer.Typer) -> None:
    """Add the `replay` command to the CLI."""
    app.command("replay")(replay_cmd)


def replay_cmd(
    session: list[str] = typer.Option([], "--session", help="replay calls recorded with this session tag (repeatable)"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="the newest N matching calls (default 200)"),
    text: str = typer.Option("", "--text", help="only calls whose query contains this text (case-insensitive)"),
    as_json: bool = json_option("print the report as one JSON object"),
    record: bool = typer.Option(False, "--record", help="record the replayed calls (nothing is recorded otherwise)"),
    tag: str | None = typer.Option(None, "--tag", help="session tag of the recorded replays (default: replay)"),
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Rerun recorded queries under the current settings: top result before/after, changed/unchanged/now empty."""
    # Imported here: the model, Weaviate and DuckDB modules take seconds, and every other command would pay.
    from retrieval.lab.replay import DEFAULT_LIMIT, REPLAY_TAG, recorded_calls, replay
    from retrieval.records.dashboard import InvocationFilter
    from retrieval.records.invocations import InvocationStore
    from retrieval.services import open_runtime

    with reported():
        settings = load_settings(config_file=config, corpus_dir=corpus)
        store = InvocationStore(settings.invocation_db, budget=db_budget(settings))
        calls, matched = recorded_calls(
            store, InvocationFilter(session_tags=tuple(session), text=text), limit=limit or DEFAULT_LIMIT
        )
    if not calls:
        fail("no recorded invocation matches: widen --session / --text")
    runtime = open_runtime(settings, record=False, log=lambda m: typer.echo(m, err=True))
    try:
        report = replay(
            calls, runtime.services, settings, recorder=store if record else None, session_tag=tag or REPLAY_TAG, matched=matched
        )
    finally:
        runtime.close()
        store.close()  # flushes the recorded replays, if any
    typer.echo(json.dumps(report.to_dict(), ensure_ascii=False) if as_json else report_text(report))


def report_text(report: ReplayReport) -> str:
    t, f = report.totals, report.figures
    lines = [
        f"{OUTCOME_MARK[c.outcome]} {c.outcome:<9}  rbo {_num(c.rbo)}  Δsupport {_num(c.support_change, signed=True)}  "
        f"{c.before_top or '(none)'} → {c.after_top or '(none)'}  {c.call.query}"
        for c in report.moved_most()
    ]
    cut = f" (newest {t['calls']} of {report.matched} matching)" if report.matched > t["calls"] else ""
    lines.append(
        f"{t['calls']} calls{cut}, {report.lookups} distinct queries: {t['changed']} changed, {t['unchanged']} unchanged, "
        f"{t['now_empty']} now empty, {t['failed']} failed; {t['same_results']} with the same ranked list"
    )
    lines.append(
        f"mean overlap@k {_num(f['overlap_at_k'])}, mean RBO (p = {RBO_P}) {_num(f['rbo'])}, mean support change "
        f"{_num(f['support_change'], signed=True)} over {f['support_compared']} calls with an estimate both times"
    )
    lines.extend(
        f"  {domain}: {d['calls']} calls, {d['changed']} top changed, RBO {_num(d['rbo'])}, "
        f"support change {_num(d['support_change'], signed=True)}"
        for domain, d in report.by_domain.items()
    )
    lines.append(f"recorded with session tag {report.session_tag!r}" if report.recorded else "nothing recorded")
    return "\n".join(lines)


def _num(x: float | None, *, signed: bool = False) -> str:
    return "–" if x is None else f"{x:+.2f}" if signed else f"{x:.2f}"
