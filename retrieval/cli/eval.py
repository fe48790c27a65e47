"""`python -m retrieval eval`: an eval set through the configurations, its report, gates and saved run.
`register(app)` adds the command to the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, CorpusOpt, json_option
from retrieval.cli.runs import save_eval_run
from retrieval.config import eval_set_corpus, load_settings
from retrieval.evals.configs import CONFIGS


def register(app: typer.Typer) -> None:
    """Add the `eval` command to the CLI."""
    app.command("eval")(eval_cmd)


def fit_line(norms, ran) -> str:
    """What the support estimate reads this knowledge base against, in one line."""
    if norms is None:
        why = f": {ran.notes[0]}" if ran is not None and ran.notes else ""
        return f"support fit: the reference baselines{why}"
    how = f"fitted now on {ran.probes} probes in {ran.seconds:.1f} s" if ran is not None else "kept from an earlier fit"
    return f"support fit {norms.fit_id} of this knowledge base ({norms.probes} probe runs), {how}"


def eval_cmd(
    eval_set: Path = typer.Argument(..., help="eval set YAML"),
    configs: str = typer.Option(",".join(CONFIGS), help="comma-separated configurations"),
    as_json: bool = json_option("print the full result as JSON"),
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
    from retrieval.evals.gates import check_gates
    from retrieval.evals.report import metrics_text, render_html
    from retrieval.evals.sets import load_eval_set
    from retrieval.services import open_runtime

    with reported(OSError, json.JSONDecodeError):
        loaded = load_eval_set(eval_set)
        settings = load_settings(
            config_file=config,
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
    try:
        with reported():
            loaded = load_eval_set(eval_set, known_ids=[e.entry_id for e in runtime.corpus.entries])
            _bring_up_to_date(runtime)
            result = _evaluate(runtime, loaded, [c.strip() for c in configs.split(",") if c.strip()], stat_test)
            failures = check_gates(result, minimum, baseline_data, loaded)
    finally:
        runtime.close()
    if report:
        report.write_text(render_html(result), encoding="utf-8")
        typer.echo(f"report written to {report}", err=True)
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


def _bring_up_to_date(runtime) -> None:
    """Ingest what changed in the corpus, then make the support fit current; say what was done on stderr."""
    from retrieval.progress import in_units, progress_display
    from retrieval.services import refresh_support_fit
    from retrieval.store import indexing

    if runtime.services.store is None:
        return
    with progress_display() as show:
        done = indexing.ingest(runtime.services.store, runtime.corpus, runtime.services.embedder, progress=show)
    typer.echo(
        f"collection {runtime.settings.collection}: {done.unchanged} unchanged, {done.added + done.updated} embedded", err=True
    )
    with progress_display() as show:
        ran = refresh_support_fit(runtime, progress=in_units(show, "probes"))
    typer.echo(fit_line(runtime.services.norms, ran), err=True)


def _evaluate(runtime, loaded, configs: list[str], stat_test: str):
    from retrieval.evals.evaluation import run_eval
    from retrieval.progress import progress_display

    with progress_display() as show:
        return run_eval(
            loaded,
            runtime.services,
            runtime.settings,
            configs=configs,
            stat_test=stat_test,
            progress=lambda d, t: show("eval", d, t, "case runs"),
        )
