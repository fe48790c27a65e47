"""`python -m retrieval ingest`, `lookup` and `sql`: index the corpus, one lookup, a read-only SELECT over the
invocation store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, CorpusOpt, JsonOpt, json_option, settings_of
from retrieval.config import db_budget


def register(app: typer.Typer) -> None:
    """Add `ingest`, `lookup` and `sql` to the CLI."""
    app.command()(ingest)
    app.command()(lookup)
    app.command()(sql)


def ingest(
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
    rebuild: bool = typer.Option(False, help="drop the collection first"),
) -> None:
    """Index the corpus in Weaviate (unchanged entries are not embedded again), then fit the support estimate's
    baselines on the knowledge base's own probes when its entries or settings changed since the last fit."""
    from retrieval.core.corpus import load_corpus
    from retrieval.core.hints import L0Index
    from retrieval.core.protocols import LookupServices
    from retrieval.engine.server import connect, place
    from retrieval.progress import in_units, progress_display
    from retrieval.services import open_embedder
    from retrieval.store import indexing
    from retrieval.store.factory import knowledge_store
    from retrieval.store.support_fit import ensure_fit

    with reported():
        settings = settings_of(config, corpus_dir=corpus)
        loaded = load_corpus(settings.corpus_dir)
        for problem in loaded.problems:
            typer.echo(f"skipped {problem.reason}", err=True)
        placed = place(settings)  # never into a server of another data directory that holds the port
        if placed.note:
            typer.echo(placed.note, err=True)
        settings = placed.settings
        client = connect(settings)
    try:
        with reported():
            store = knowledge_store(client, settings)
            if rebuild:
                store.drop()
            embedder = open_embedder(settings)
            with progress_display() as show:
                report = indexing.ingest(store, loaded, embedder, progress=show)
                services: LookupServices = LookupServices(l0=L0Index(loaded.entries), embedder=embedder, store=store)
                norms, ran = ensure_fit(store, loaded, services, settings, progress=in_units(show, "probes"))
            typer.echo(
                json.dumps(
                    {
                        "corpus": str(settings.corpus_dir),
                        "collection": settings.collection,
                        "skipped_files": len(loaded.problems),
                        **report.to_dict(),
                        "support_fit": {
                            **(norms.describe() if norms is not None else {"kind": "reference"}),
                            "fitted_now": ran is not None,
                            "seconds": None if ran is None else round(ran.seconds, 2),
                        },
                    }
                )
            )
    finally:
        client.close()


def lookup(
    query: str,
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
    session: str | None = typer.Option(None, help="session/run tag for the record"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="say on stderr which process answered"),
) -> None:
    """Run lookup_knowledge once and record it. With a standing server (`server start`) of the same settings, its
    keeper runs it with the model and corpus it keeps open; otherwise this process opens them."""
    with reported():
        settings = settings_of(config, corpus_dir=corpus, session_tag=session)
        from retrieval.core.lookup import clean_query

        clean_query(query)  # refuse before starting anything
        from retrieval.serve.warm_client import HERE_ANSWERED, KEEPER_ANSWERED, NO_KEEPER, ask_keeper

        answer = ask_keeper(settings, query, session_tag=session)
        if answer.refused and answer.refused != NO_KEEPER:  # a keeper is there, but this call is not its to answer
            typer.echo(f"{answer.refused}: this call opens the services itself", err=True)
        result = answer.result if answer.result is not None else _lookup_here(settings, query)
        if verbose:
            typer.echo(KEEPER_ANSWERED if answer.result is not None else HERE_ANSWERED, err=True)
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    typer.echo(answer_line(result))
    l1 = result["l1"]
    typer.echo(f"layer: {result['layer']}   routing: {result['routing']}   L1: {l1['status']}")
    if l1.get("error"):
        typer.echo(f"L1 error: {l1['error']}")
    for i, r in enumerate(result["results"], 1):
        typer.echo(f"{i:>2}. {r['entry_id']}  [{r['source']}]  score={r['score']:.3f}  {r['title']}")
    rel = result["relevance"]
    typer.echo(f"relevance: {rel['level']} (semantic support: {'yes' if rel['semantic_support'] else 'no'}) - {rel['reason']}")
    typer.echo(f"invocation: {result['invocation_id']}")


def answer_line(result: dict) -> str:
    """The first line of a lookup in text: whether the knowledge base holds a supported answer, and which."""
    rel, results = result["relevance"], result["results"]
    if rel["semantic_support"] and results:
        return f"{result['answer']}: {results[0]['entry_id']} (support estimate {rel['estimate']})"
    if results:
        return f"{result['answer']} (the nearest entries are listed; support estimate {rel['estimate']})"
    return f"{result['answer']}: nothing found"


def _lookup_here(settings, query: str) -> dict:
    """The lookup in this process: it opens the corpus, model and Weaviate itself (starting an embedded server when
    none serves the settings' ports)."""
    from retrieval.core.lookup import lookup_knowledge
    from retrieval.services import open_runtime

    # the record goes to the spool, never waiting for the DuckDB file: the next store that flushes moves it in
    runtime = open_runtime(settings, record="spool", log=lambda m: typer.echo(m, err=True))
    try:
        return lookup_knowledge(query, runtime.services, settings.options()).to_dict()
    finally:
        runtime.close()


def sql(
    statement: str,
    as_json: bool = json_option("print JSON lines"),
    config: Path | None = ConfigOpt,
    limit: int = typer.Option(10_000, help="row limit"),
    timeout_ms: int = typer.Option(5_000, help="time limit in milliseconds"),
) -> None:
    """One read-only SELECT over the invocation store. Rows are printed in full."""
    from retrieval.records.invocations import InvocationStore
    from retrieval.records.sql_console import run_readonly

    with reported():
        settings = settings_of(config)
        store = InvocationStore(settings.invocation_db, budget=db_budget(settings))
        store.flush()
        out = run_readonly(store, statement, row_limit=limit, timeout_ms=timeout_ms)
    if as_json:
        for row in out.frame.to_dict(orient="records"):
            typer.echo(json.dumps(row, ensure_ascii=False, default=str))
    else:
        typer.echo(out.frame.to_csv(sep="\t", index=False), nl=False)
    if out.truncated:
        typer.echo(f"(stopped at the row limit of {limit}; use --limit to see more)", err=True)
