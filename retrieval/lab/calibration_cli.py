"""`python -m retrieval calibrate`: fit the support estimate to eval sets, with held-out-fold figures."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.lab.sweep_cli import ConfigOpt, CorpusOpt, JsonOpt, SetsArg, gather_signals


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


def calibrate(
    eval_sets: list[Path] = SetsArg,
    folds: int = typer.Option(5, "--folds", help="folds of the cross-validation (stratified by set)"),
    as_json: bool = JsonOpt,
    config: Path | None = ConfigOpt,
    corpus: Path | None = CorpusOpt,
) -> None:
    """Fit the support estimate of the current embedding model and fusion weights to answerable and unanswerable
    eval sets; print its AUC and promises in-sample and on held-out folds, and the model to put in retrieval/core/support.py."""
    from retrieval.config import load_settings
    from retrieval.errors import LookupLabError
    from retrieval.evals.sets import load_eval_set
    from retrieval.lab.calibration import calibrate as fit_calibration
    from retrieval.lab.calibration import case_support
    from retrieval.lab.sweep_signals import query_keys
    from retrieval.progress import progress_display

    try:
        base = load_settings(config_file=config, corpus_dir=corpus)
        loaded = [load_eval_set(p) for p in eval_sets]
        if folds < 2:
            raise LookupLabError(f"--folds {folds}: a cross-validation needs at least 2 folds")
        with progress_display() as show:
            signals = gather_signals(eval_sets, loaded, base, corpus, query_keys(base), show)
        cases = case_support(signals, base)
        if len({c.right for c in cases}) < 2:
            raise LookupLabError("the sets give only right or only wrong top results: add answerable and unanswerable sets")
        what = (
            f"{base.embedding_model}, vector {base.vector_weight:g} lexical {base.lexical_weight:g} name {base.name_weight:g}; "
            f"{', '.join(e.name for e in loaded)}"
        )
        result = fit_calibration(cases, folds=folds, fitted_on=what)
    except LookupLabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    for label, figures in (("in-sample", result.in_sample), ("held-out folds", result.held_out)):
        auc = figures["auc"]
        typer.echo(f"{label}: AUC {'–' if auc is None else f'{auc:.3f}'}")
        for name, value in figures["promises"].items():
            typer.echo(f"  {name}: {value:.3f}")
    m = result.model
    typer.echo(f"\nthreshold {m.threshold:.2f}; for retrieval/core/support.py SUPPORT_MODELS[{base.embedding_model!r}]:")
    typer.echo(f"SupportModel({m.intercept!r}, {m.weights!r}, {m.means!r}, {m.scales!r}, {m.threshold!r}, {m.fitted_on!r})")
