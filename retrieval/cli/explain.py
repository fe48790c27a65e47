"""`python -m retrieval explain`: why an entry is where it is (or absent) for a query, stage by stage, and with
`--what-it-would-take` the smallest setting change that puts it first (retrieval.core.explain, retrieval.core.remedies).
It records nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, CorpusOpt, JsonOpt
from retrieval.config import load_settings

if TYPE_CHECKING:
    from retrieval.core.explain import EntryTrace, ListRank, SignalStage
    from retrieval.core.remedies import Remedies


def register(app: typer.Typer) -> None:
    """Add the `explain` command to the CLI."""
    app.command("explain")(explain_cmd)


def explain_cmd(
    query: str,
    entry: str = typer.Option(..., "--entry", "-e", help="the entry id to explain (as lookup results name it)"),
    take: bool = typer.Option(False, "--what-it-would-take", help="also run the lookup under each single change"),
    model: list[str] = typer.Option(
        [],
        "--model",
        help="with --what-it-would-take: also try this embedding model (repeatable; its collection is brought up to date)",
    ),
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Why not this entry? Its L0 match, the route, its rank in each L1 list (with and without the filter), its parts
    in the fusion against the top result, and the verdict: the first stage that put it below the top."""
    # Imported here: the model and Weaviate modules take seconds, and every other command would pay.
    from retrieval.core.explain import explain_entry
    from retrieval.core.lookup import clean_query
    from retrieval.core.remedies import what_it_would_take
    from retrieval.services import open_runtime, other_model_services

    with reported():
        settings = load_settings(config_file=config, corpus_dir=corpus)
        clean_query(query)  # refuse before starting anything
    runtime = open_runtime(settings, record=False, log=lambda m: typer.echo(m, err=True))
    try:
        with reported():
            options = runtime.settings.options()
            trace = explain_entry(query, entry, runtime.services, options)
            remedies = None
            if take:
                models = {m: _opener(other_model_services, runtime, m) for m in model if m != options.embedding_model}
                remedies = what_it_would_take(query, entry, runtime.services, options, models=models)
    finally:
        runtime.close()
    if as_json:
        out: dict[str, Any] = trace.to_dict()
        if remedies is not None:
            out["what_it_would_take"] = remedies.to_dict()
        typer.echo(json.dumps(out, ensure_ascii=False))
        return
    for line in trace_lines(trace):
        typer.echo(line)
    if remedies is not None:
        typer.echo("")
        typer.echo(remedies_line(remedies))


def _opener(open_other: Any, runtime: Any, model: str) -> Any:
    return lambda: open_other(runtime, model)


def _list_rank(r: ListRank | None) -> str:
    return "-" if r is None else r.describe()


def _signal_line(name: str, s: SignalStage | None) -> str:
    if s is None:
        return f"{name}: not searched"
    cut = f"rank {s.in_lookup} of the lookup's {s.depth}" if s.in_lookup else f"not in the lookup's {s.depth}"
    line = f"{name}: {cut}; among all entries unfiltered {_list_rank(s.unfiltered)}"
    if s.filtered is not None:
        line += f", filtered {_list_rank(s.filtered)}"
    if s.signal == "vector" and s.chunk_index is not None:
        line += f"; best chunk {s.chunk_index}"
    if s.field_hits:
        line += "; fields: " + ", ".join(f"{f} ({' '.join(w)})" for f, w in s.field_hits)
    return line


def trace_lines(trace: EntryTrace) -> list[str]:
    """The trace in text: the verdict first, then each stage in the order the lookup runs them."""
    l0, f = trace.l0, trace.fusion
    matched = ", ".join(f"{t.term} ({t.field})" for t in l0.matched) or "nothing of it"
    route = f"filtered on category = {trace.route}" if trace.route else "unfiltered"
    lines = [
        f"{trace.entry_id}: {trace.verdict}",
        f"  title: {trace.title}   domain: {trace.domain}",
        f"  L0: matched {matched}"
        + (f"; rank {l0.rank} of {l0.matched_entries} matched" if l0.rank else f"; {l0.matched_entries} entries matched"),
    ]
    if l0.query_lacks:
        lines.append(f"      query words it lacks: {', '.join(l0.query_lacks)}")
    lines.append(f"  route: {route} (L0 domains: {', '.join(trace.domains) or 'none'}; L1 {trace.l1_status})")
    lines.append("  " + _signal_line("vector", trace.vector))
    lines.append("  " + _signal_line("BM25F", trace.bm25))
    top = f" against the top {f.top} ({f.top_score:.4f})" if f.top and f.top_score is not None else ""
    score = "no fused score" if f.score is None else f"fused score {f.score:.4f}"
    lines.append(f"  fusion: {score}{top}, rank {f.rank or '-'} of {f.ranked}")
    for mine, theirs in zip(f.parts, f.top_parts, strict=True):
        lines.append(f"      {mine.signal:<6} {mine.value:.4f} against {theirs.value:.4f}")
    return lines


def remedies_line(r: Remedies) -> str:
    """What it would take, in one line, with the number of changes tried."""
    return f"what it would take ({len(r.tried)} changes run): {r.summary()}"
