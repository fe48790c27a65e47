"""`python -m retrieval sweep` (and `tune`, the same with a fusion-weight grid by default)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, corpus_option, json_option
from retrieval.evals.tuning import ALIASES, SWEEPABLE

TUNE_GRID = "vector_weight=0.5,1,2,3,4;l0_weight=0,0.1,0.2,0.3,0.5"
GRID_HELP = "NAME=V1,V2;NAME=... over " + ", ".join(
    name + "".join(f" ({alias})" for alias, full in ALIASES.items() if full == name) for name in SWEEPABLE
)


def register(app: typer.Typer) -> None:
    """Add `sweep` and `tune` to the CLI."""
    app.command("sweep")(sweep)
    app.command("tune")(tune)


SetsArg = typer.Argument(..., help="eval set YAML files; each runs on the corpus it names")
FoldsOpt = typer.Option(5, "--folds", help="folds of --cv kfold (stratified by set)")
RepeatsOpt = typer.Option(5, "--repeats", help="shuffles of the folds of --cv kfold")
CvOpt = typer.Option(
    None,
    "--cv",
    help="sets: leave one set out (and one corpus out, when the sets span two), the default for two or more sets; "
    "kfold: stratified k-fold, which measures new queries of the styles seen, not a new style",
)
ChooseOpt = typer.Option("mean", "--choose", help="choose the point by the mean of the sets' mrr@10, or by the worst set")
JsonOpt = json_option("print the full result as JSON")
CorpusOpt = corpus_option("corpus folder for every set (default: the one each set names)")


def sweep(
    eval_sets: list[Path] = SetsArg,
    grid: str = typer.Option(..., "--grid", help=GRID_HELP),
    folds: int = FoldsOpt,
    repeats: int = RepeatsOpt,
    cv: str | None = CvOpt,
    choose: str = ChooseOpt,
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Every grid point on every case; the choice cross-validated; the best against the current settings."""
    _run(eval_sets, grid, folds, repeats, cv, choose, as_json, config, corpus)


def tune(
    eval_sets: list[Path] = SetsArg,
    grid: str = typer.Option(TUNE_GRID, "--grid", help=GRID_HELP),
    folds: int = FoldsOpt,
    repeats: int = RepeatsOpt,
    cv: str | None = CvOpt,
    choose: str = ChooseOpt,
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """`sweep` with a fusion-weight grid by default."""
    _run(eval_sets, grid, folds, repeats, cv, choose, as_json, config, corpus)


def _run(
    paths: list[Path],
    grid_text: str,
    folds: int,
    repeats: int,
    cv: str | None,
    choose: str,
    as_json: bool,
    config: Path | None,
    corpus: Path | None,
) -> None:
    from retrieval.config import load_settings
    from retrieval.errors import LookupLabError
    from retrieval.evals.set_folds import CHOOSE_RULES
    from retrieval.evals.sets import load_eval_set
    from retrieval.evals.tuning import parse_grid
    from retrieval.lab.sweep import check_folds, cv_for, run_sweep
    from retrieval.lab.sweep_signals import keys_for
    from retrieval.progress import progress_display

    started = time.perf_counter()
    with reported():
        base = load_settings(config_file=config, corpus_dir=corpus)
        grid = parse_grid(grid_text, base)
        loaded = [load_eval_set(p) for p in paths]
        if choose not in CHOOSE_RULES:
            raise LookupLabError(f"--choose {choose!r}: one of {', '.join(CHOOSE_RULES)}")
        method = cv_for(loaded, cv)
        check_folds(loaded, folds, repeats, method)
    keys = keys_for(grid, base)
    with reported(), progress_display() as show:
        signals = gather_signals(paths, loaded, base, corpus, keys, show)
        fetched = time.perf_counter()
        result = run_sweep(
            signals,
            grid,
            base,
            cv=method,
            choose=choose,
            folds=folds,
            repeats=repeats,
            progress=lambda s, d, t: show(s, d, t, "points"),
        )
    done = time.perf_counter()
    timings = {"signals": round(fetched - started, 3), "points": round(done - fetched, 3), "total": round(done - started, 3)}
    if as_json:
        typer.echo(json.dumps({**result.to_dict(), "timings_s": timings}, ensure_ascii=False, default=str))
        return
    from retrieval.lab.sweep_report import summary

    typer.echo(summary(result.to_dict(), timings))


def gather_signals(paths, loaded, base, corpus: Path | None, keys, show) -> list:
    """Every case's signals for `keys`, each set on the corpus it names (or `corpus`), ingesting what changed."""
    from retrieval.config import eval_set_corpus
    from retrieval.evals.sets import load_eval_set
    from retrieval.lab.sweep_signals import collect_signals
    from retrieval.progress import in_units
    from retrieval.services import open_embedder, open_runtime, refresh_support_fit
    from retrieval.store import indexing
    from retrieval.store.factory import knowledge_store

    signals: list = []
    embedders: dict = {}  # model -> its Embedder, loaded once for every set
    log = lambda m: typer.echo(m, err=True)  # noqa: E731
    models = list(dict.fromkeys([base.embedding_model, *(k.model for k in keys)]))
    for path, eval_set in zip(paths, loaded, strict=True):
        use = eval_set_corpus(corpus, eval_set.corpus_dir)
        settings = base.with_(corpus_dir=use) if use else base
        runtime = open_runtime(settings, embedder=embedders.get(settings.embedding_model), record=False, log=log)
        try:
            # each model searches its own collection of this corpus, over the one connection, brought up to date
            by_model = {}
            for model in models:
                services = runtime.services
                if model != settings.embedding_model and runtime.client is not None:
                    other = settings.with_(embedding_model=model)
                    embedder = embedders.get(model) or open_embedder(other)
                    services = replace(
                        services,
                        embedder=embedder,
                        store=knowledge_store(runtime.client, other),
                    )
                if services.embedder is not None:
                    embedders[model] = services.embedder
                if services.store is not None:
                    indexing.ingest(services.store, runtime.corpus, services.embedder, progress=show)
                by_model[model] = services
            refresh_support_fit(runtime, progress=in_units(show, "probes"))  # the corpus's own support baselines
            checked = load_eval_set(path, known_ids=[e.entry_id for e in runtime.corpus.entries])
            others = {m: s for m, s in by_model.items() if m != settings.embedding_model}
            signals.extend(
                collect_signals(
                    checked,
                    runtime.services,
                    settings,
                    keys,
                    progress=lambda s, d, t: show(s, d, t, "queries"),
                    other_models=others,
                )
            )
        finally:
            runtime.close()
    return signals
