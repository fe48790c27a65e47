"""`python -m retrieval`: ingest, lookup and read-only sql over the invocation store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.config import db_budget, eval_set_corpus, load_settings
from retrieval.errors import LookupLabError
from retrieval.lab.calibration_cli import register as register_calibrate
from retrieval.lab.replay_cli import register as register_replay
from retrieval.lab.runs_cli import register as register_runs
from retrieval.lab.sweep_cli import register as register_sweep
from retrieval.progress import progress_display
from retrieval.serve.serve_cli import serve as serve_command
from retrieval.store import indexing
from retrieval.store.cluster_cli import register as register_cluster
from retrieval.store.models_cli import register as register_models

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Lookup Lab: lookup_knowledge from the command line.")


def _settings(config: Path | None, **overrides):
    return load_settings(config_file=config, **overrides)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


ConfigOpt = typer.Option(None, "--config", help="YAML settings file (default: LOOKUP_CONFIG or ./lookup.yaml)")
CorpusOpt = typer.Option(None, "--corpus", help="corpus folder (overrides LOOKUP_CORPUS_DIR)")


@app.command()
def ingest(
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
    rebuild: bool = typer.Option(False, help="drop the collection first"),
) -> None:
    """Index the corpus in Weaviate. Unchanged entries are not embedded again."""
    from retrieval.core.corpus import load_corpus
    from retrieval.services import open_embedder
    from retrieval.store.weaviate_server import connect
    from retrieval.store.weaviate_store import KnowledgeStore

    try:
        settings = _settings(config, corpus_dir=corpus)
        loaded = load_corpus(settings.corpus_dir)
        for problem in loaded.problems:
            typer.echo(f"skipped {problem.reason}", err=True)
        client = connect(settings)
    except LookupLabError as exc:
        _fail(exc)
    try:
        store = KnowledgeStore(client, settings.collection, embedding_model=settings.embedding_model)
        if rebuild:
            store.drop()
        embedder = open_embedder(settings)
        with progress_display() as show:
            report = indexing.ingest(store, loaded, embedder, progress=show)
        typer.echo(
            json.dumps(
                {
                    "corpus": str(settings.corpus_dir),
                    "collection": settings.collection,
                    "skipped_files": len(loaded.problems),
                    **report.to_dict(),
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
) -> None:
    """Run lookup_knowledge once and record it."""
    from retrieval.core.lookup import lookup_knowledge
    from retrieval.services import open_runtime

    try:
        settings = _settings(config, corpus_dir=corpus, session_tag=session)
        from retrieval.core.lookup import clean_query

        clean_query(query)  # refuse before starting anything
        runtime = open_runtime(settings, log=lambda m: typer.echo(m, err=True))
    except LookupLabError as exc:
        _fail(exc)
    try:
        result = lookup_knowledge(query, runtime.services, settings)
    except LookupLabError as exc:
        _fail(exc)
    finally:
        runtime.close()
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    typer.echo(f"layer: {result.layer}   routing: {result.routing}   L1: {result.l1.status}")
    if result.l1.error:
        typer.echo(f"L1 error: {result.l1.error}")
    for i, r in enumerate(result.results, 1):
        typer.echo(f"{i:>2}. {r.entry_id}  [{r.source}]  score={r.score:.3f}  {r.title}")
    rel = result.relevance
    typer.echo(f"relevance: {rel.level} (semantic support: {'yes' if rel.semantic_support else 'no'}) - {rel.reason}")
    typer.echo(f"invocation: {result.invocation_id}")


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


@app.command("eval")
def eval_cmd(
    eval_set: Path = typer.Argument(..., help="eval set YAML"),
    configs: str = typer.Option(
        ",".join(("l0_only", "l1_unfiltered", "l1_filtered", "bm25", "hybrid", "lookup")), help="comma-separated configurations"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the full result as JSON"),
    report: Path | None = typer.Option(None, "--report", help="write a self-contained HTML report"),
    minimum: list[str] = typer.Option([], "--min", help="gate CONFIG:METRIC=VALUE, e.g. lookup:mrr@10=0.9 (repeatable)"),
    baseline: Path | None = typer.Option(None, "--baseline", help="a saved --json result; fail on a significant regression"),
    top_k: int | None = typer.Option(None, "--top-k", help="results per lookup (metrics look at 10 at least)"),
    mode: str | None = typer.Option(None, "--mode", help="the lookup's mode: fusion, near_vector or hybrid"),
    alpha: float | None = typer.Option(None, "--alpha", help="hybrid alpha"),
    l0_weight: float | None = typer.Option(None, "--l0-weight", help="weight of L0 evidence in the lookup ranking"),
    vector_weight: float | None = typer.Option(None, "--vector-weight", help="weight of the vector signal in the fusion"),
    lexical_weight: float | None = typer.Option(None, "--lexical-weight", help="weight of the BM25F signal in the fusion"),
    name_weight: float | None = typer.Option(None, "--name-weight", help="added for an entry the query names in full"),
    support_threshold: float | None = typer.Option(
        None, "--support-threshold", help="support estimate (0-1) that claims semantic support (default: the model's)"
    ),
    model: str | None = typer.Option(None, "--model", help="embedding model (python -m retrieval models lists them)"),
    stat_test: str = typer.Option("student", "--stat-test", help="student (paired t-test) or fisher (randomization)"),
    save: bool = typer.Option(True, "--save/--no-save", help="save the run in the DuckDB file (`runs` lists, `compare` diffs)"),
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Run an eval set through the configurations; print metrics, significance and routing figures."""
    from retrieval.evals.evaluation import check_gates, run_eval
    from retrieval.evals.report import metrics_text, render_html
    from retrieval.evals.sets import load_eval_set
    from retrieval.services import open_runtime

    try:
        loaded = load_eval_set(eval_set)
        settings = _settings(
            config,
            corpus_dir=eval_set_corpus(corpus, loaded.corpus_dir),
            top_k=top_k,
            search_mode=mode,
            hybrid_alpha=alpha,
            l0_weight=l0_weight,
            vector_weight=vector_weight,
            lexical_weight=lexical_weight,
            name_weight=name_weight,
            support_threshold=support_threshold,
            embedding_model=model,
        )
        baseline_data = json.loads(baseline.read_text(encoding="utf-8")) if baseline else None
        runtime = open_runtime(settings, log=lambda m: typer.echo(m, err=True))
    except (LookupLabError, OSError, json.JSONDecodeError) as exc:
        _fail(exc)
    try:
        loaded = load_eval_set(eval_set, known_ids=[e.entry_id for e in runtime.corpus.entries])
        if runtime.services.store is not None:
            with progress_display() as show:
                ingest_report = indexing.ingest(runtime.services.store, runtime.corpus, runtime.services.embedder, progress=show)
            typer.echo(
                f"collection {settings.collection}: {ingest_report.unchanged} unchanged, "
                f"{ingest_report.added + ingest_report.updated} embedded",
                err=True,
            )
        with progress_display() as show:
            result = run_eval(
                loaded,
                runtime.services,
                settings,
                configs=[c.strip() for c in configs.split(",") if c.strip()],
                stat_test=stat_test,
                progress=lambda d, t: show("eval", d, t, "case runs"),
            )
        failures = check_gates(result, minimum, baseline_data, loaded)
    except LookupLabError as exc:
        _fail(exc)
    finally:
        runtime.close()
    if report:
        report.write_text(render_html(result), encoding="utf-8")
        typer.echo(f"report written to {report}", err=True)
    from retrieval.lab.runs_cli import save_eval_run

    run_id = save_eval_run(result, loaded, settings) if save else None
    if as_json:
        typer.echo(json.dumps({**result.to_dict(), "run_id": run_id}, ensure_ascii=False, default=str))
    else:
        typer.echo(metrics_text(result) + (f"\nrun id: {run_id}" if run_id else "\nrun not saved"))
    for failure in failures:
        typer.echo(f"GATE FAILED: {failure}", err=True)
    if failures:
        raise typer.Exit(1)
    if save and run_id is None:
        raise typer.Exit(2)


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
            figures = run_cluster_bench(_settings(config), nodes=cluster, size=first, queries=queries, out_dir=out_dir, log=log)
        except (LookupLabError, ValueError) as exc:
            _fail(exc)
        typer.echo(json.dumps(figures, default=str) if as_json else figures["table"])
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


register_cluster(app)  # cluster start|status|stop (retrieval/store/cluster_cli.py)

register_sweep(app)  # sweep and its alias tune (retrieval/lab/sweep_cli.py)
register_replay(app)  # replay: recorded calls rerun under the current settings (retrieval/lab/replay_cli.py)
register_runs(app)  # runs and compare: saved eval runs (retrieval/lab/runs_cli.py)
register_models(app)  # models: list, fetch (retrieval/store/models_cli.py)
register_calibrate(app)  # calibrate: fit the support estimate (retrieval/lab/calibration_cli.py)


def main() -> None:
    from retrieval.store.shutdown import exit_on_signals

    exit_on_signals()  # SIGTERM/SIGINT unwind the command, so the embedded server it started is stopped
    import sys

    invoked = Path(sys.argv[0]).name if sys.argv else ""
    app(prog_name=invoked if invoked == "lookup-lab" else "python -m retrieval")  # the installed console script, or -m
