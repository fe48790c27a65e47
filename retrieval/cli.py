"""`python -m retrieval`: the typer app, with ingest, lookup, read-only sql over the invocation store and bench; the
other commands are registered from their packages' *_cli modules."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.config import db_budget, load_settings
from retrieval.engine.cluster_cli import register as register_cluster
from retrieval.errors import LookupLabError
from retrieval.lab.calibration_cli import register as register_calibrate
from retrieval.lab.eval_cli import register as register_eval
from retrieval.lab.explain_cli import register as register_explain
from retrieval.lab.replay_cli import register as register_replay
from retrieval.lab.runs_cli import register as register_runs
from retrieval.lab.sweep_cli import register as register_sweep
from retrieval.serve.serve_cli import serve as serve_command
from retrieval.serve.standing_cli import register as register_server
from retrieval.store.models_cli import register as register_models
from retrieval.traffic.traffic_cli import register as register_traffic

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Lookup Lab: lookup_knowledge from the command line.")


def _settings(config: Path | None, **overrides):
    return load_settings(config_file=config, **overrides)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _load_bench(config: Path | None, plan: dict, out_dir: Path, as_json: bool) -> None:
    """`bench --load`: the load bench's table (or JSON) on stdout, its progress on stderr."""
    from retrieval.bench.load import LoadPlan, run_load_bench

    try:
        figures = run_load_bench(_settings(config), LoadPlan(**plan), out_dir=out_dir, log=lambda m: typer.echo(m, err=True))
    except LookupLabError as exc:
        _fail(exc)
    typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])


ConfigOpt = typer.Option(None, "--config", help="YAML settings file (default: LOOKUP_CONFIG or ./lookup.yaml)")
CorpusOpt = typer.Option(None, "--corpus", help="corpus folder (overrides LOOKUP_CORPUS_DIR)")


@app.command()
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

    try:
        settings = _settings(config, corpus_dir=corpus)
        loaded = load_corpus(settings.corpus_dir)
        for problem in loaded.problems:
            typer.echo(f"skipped {problem.reason}", err=True)
        placed = place(settings)  # never into a server of another data directory that holds the port
        if placed.note:
            typer.echo(placed.note, err=True)
        settings = placed.settings
        client = connect(settings)
    except LookupLabError as exc:
        _fail(exc)
    try:
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
    except LookupLabError as exc:
        _fail(exc)
    finally:
        client.close()


@app.command()
def lookup(
    query: str,
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
    session: str | None = typer.Option(None, help="session/run tag for the record"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="say on stderr which process answered"),
) -> None:
    """Run lookup_knowledge once and record it. With a standing server (`server start`) of the same settings, its
    keeper runs it with the model and corpus it keeps open; otherwise this process opens them."""
    try:
        settings = _settings(config, corpus_dir=corpus, session_tag=session)
        from retrieval.core.lookup import clean_query

        clean_query(query)  # refuse before starting anything
        from retrieval.serve.warm_client import HERE_ANSWERED, KEEPER_ANSWERED, NO_KEEPER, ask_keeper

        answer = ask_keeper(settings, query, session_tag=session)
        if answer.refused and answer.refused != NO_KEEPER:  # a keeper is there, but this call is not its to answer
            typer.echo(f"{answer.refused}: this call opens the services itself", err=True)
        result = answer.result if answer.result is not None else _lookup_here(settings, query)
        if verbose:
            typer.echo(KEEPER_ANSWERED if answer.result is not None else HERE_ANSWERED, err=True)
    except LookupLabError as exc:
        _fail(exc)
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


@app.command()
def sql(
    statement: str,
    as_json: bool = typer.Option(False, "--json", help="print JSON lines"),
    config: Path | None = ConfigOpt,
    limit: int = typer.Option(10_000, help="row limit"),
    timeout_ms: int = typer.Option(5_000, help="time limit in milliseconds"),
) -> None:
    """One read-only SELECT over the invocation store. Rows are printed in full."""
    from retrieval.records.invocations import InvocationStore
    from retrieval.records.sql_console import run_readonly

    try:
        settings = _settings(config)
        store = InvocationStore(settings.invocation_db, budget=db_budget(settings))
        store.flush()
        out = run_readonly(store, statement, row_limit=limit, timeout_ms=timeout_ms)
    except LookupLabError as exc:
        _fail(exc)
    if as_json:
        for row in out.frame.to_dict(orient="records"):
            typer.echo(json.dumps(row, ensure_ascii=False, default=str))
    else:
        typer.echo(out.frame.to_csv(sep="\t", index=False), nl=False)
    if out.truncated:
        typer.echo(f"(stopped at the row limit of {limit}; use --limit to see more)", err=True)


register_eval(app)  # eval: an eval set through the configurations (retrieval/lab/eval_cli.py)
register_explain(app)  # explain: why not this entry? (retrieval/lab/explain_cli.py)


@app.command()
def bench(
    sizes: str = typer.Option("1000,10000", help="comma-separated knowledge-base sizes"),
    as_json: bool = typer.Option(False, "--json", help="print the figures as JSON"),
    queries: int = typer.Option(200, help="lookups timed per size"),
    out_dir: Path = typer.Option(Path("bench/results"), "--out", help="where the dated result table is written"),
    invocation_rows: int = typer.Option(
        1_000_000, "--invocation-rows", help="synthetic tool_invocation rows for the dashboard queries (0 skips them)"
    ),
    server: bool = typer.Option(False, "--server", help="only the MCP server part: its added p50 over a direct call, calls/s"),
    cluster: int = typer.Option(0, "--cluster", help="only the cluster part: the first size on one node and on N nodes"),
    load: bool = typer.Option(False, "--load", help="only the load part: concurrent MCP SDK clients against serve"),
    clients: int = typer.Option(50, "--clients", help="--load: concurrent clients"),
    calls: int = typer.Option(40, "--calls", help="--load: timed lookup_knowledge calls per client"),
    load_transport: str = typer.Option("http", "--load-transport", help="--load: http (one server) or stdio (one per client)"),
    kill: bool = typer.Option(False, "--kill", help="--load: kill -9 the server mid-run, restart it, count lost calls"),
    soak_minutes: float = typer.Option(0.0, "--soak-minutes", help="--load: then a soak at half the rate, RSS each minute"),
    vectors: str = typer.Option(
        "real", "--vectors", help="real (every chunk embedded) or synthetic (template embeddings + noise; queries real)"
    ),
    config: Path | None = ConfigOpt,
) -> None:
    """Benchmark L0, lookup, filtered L1, recording, ingest and the invocation store on synthetic knowledge bases."""
    from retrieval.bench.runner import run_bench

    if cluster:
        from retrieval.bench.cluster import run_cluster_bench

        try:
            first = int(sizes.split(",")[0])
            log = lambda m: typer.echo(m, err=True)  # noqa: E731
            figures = run_cluster_bench(
                _settings(config), nodes=cluster, size=first, queries=queries, out_dir=out_dir, log=log, vectors=vectors
            )
        except (LookupLabError, ValueError) as exc:
            _fail(exc)
        typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])
        return
    if load:
        _load_bench(
            config,
            dict(clients=clients, calls=calls, transport=load_transport, kill=kill, soak_minutes=soak_minutes),
            out_dir,
            as_json,
        )
        return
    if server:
        from retrieval.bench.server import run_server_bench

        try:
            figures = run_server_bench(_settings(config), out_dir=out_dir, log=lambda m: typer.echo(m, err=True))
        except LookupLabError as exc:
            _fail(exc)
        typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])
        return
    try:
        settings = _settings(config)
        sizes_list = [int(x) for x in sizes.split(",") if x.strip()]
        if not sizes_list or min(sizes_list) < 1 or invocation_rows < 0 or queries < 1:
            raise ValueError(
                f"--sizes {sizes!r}, --queries {queries} and --invocation-rows {invocation_rows} must be positive (rows may be 0)"
            )
    except (LookupLabError, ValueError) as exc:
        _fail(exc)
    try:
        result = run_bench(
            settings,
            sizes=sizes_list,
            queries=queries,
            out_dir=out_dir,
            invocation_rows=invocation_rows,
            log=lambda m: typer.echo(m, err=True),
            vectors=vectors,
        )
    except (LookupLabError, ValueError) as exc:
        _fail(exc)
    typer.echo(json.dumps(result, default=str) if as_json else result.get("table", json.dumps(result, indent=2, default=str)))


app.command(name="serve")(serve_command)  # retrieval/serve/serve_cli.py: `python -m retrieval serve` starts without this module


register_cluster(app)  # cluster start|status|stop (retrieval/engine/cluster_cli.py)
register_server(app)  # server start|status|stop: a standing embedded Weaviate (retrieval/serve/standing_cli.py)

register_sweep(app)  # sweep and its alias tune (retrieval/lab/sweep_cli.py)
register_replay(app)  # replay: recorded calls rerun under the current settings (retrieval/lab/replay_cli.py)
register_runs(app)  # runs and compare: saved eval runs (retrieval/lab/runs_cli.py)
register_models(app)  # models: list, fetch (retrieval/store/models_cli.py)
register_calibrate(app)  # calibrate: fit the support estimate (retrieval/lab/calibration_cli.py)
register_traffic(app)  # traffic: the label-free estimate of the recorded calls (retrieval/traffic/traffic_cli.py)


def main() -> None:
    from retrieval.engine.shutdown import exit_on_signals

    exit_on_signals()  # SIGTERM/SIGINT unwind the command, so the embedded server it started is stopped
    import sys

    invoked = Path(sys.argv[0]).name if sys.argv else ""
    app(prog_name=invoked if invoked == "lookup-lab" else "python -m retrieval")  # the installed console script, or -m
