"""`python -m retrieval calibrate`: fit the support estimate to eval sets, with held-out-fold figures."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.lab.sweep_cli import ConfigOpt, CorpusOpt, JsonOpt, SetsArg, gather_signals


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


HELD_OUT = {"sets": "each set fitted without it", "corpora": "each corpus fitted without it", "kfold": "stratified folds"}


def promise_table(result) -> str:
    """Per set: its promise in-sample and held out (by the calibration's cv, and by corpus), and its AUC; each
    promise against its target (right answers supported / hit@1 >= 0.90, unanswerable left unsupported >= 0.85)."""
    from retrieval.lab.calibration import CORRECT_SUPPORTED_TARGET, UNANSWERABLE_UNSUPPORTED_TARGET

    blocks = [("in-sample", result.in_sample), (HELD_OUT[result.cv], result.held_out)]
    if result.held_out_corpora is not None:
        blocks.append((HELD_OUT["corpora"], result.held_out_corpora))
    head = ["set", "target", *[label for label, _ in blocks], "AUC in-sample", "AUC held out"]
    rows = [head]
    answerable = dict(result.in_sample.get("answerable", {}))
    for name in result.in_sample["promises"]:
        target = CORRECT_SUPPORTED_TARGET if answerable.get(name, True) else UNANSWERABLE_UNSUPPORTED_TARGET
        cells = []
        for _, figures in blocks:
            v = figures["promises"].get(name)
            cells.append("–" if v is None else f"{v:.3f}" + ("" if v >= target else " (below)"))
        a_in, a_out = result.in_sample["auc_per_set"].get(name), result.held_out["auc_per_set"].get(name)
        rows.append([name, f"{target:.2f}", *cells, _num(a_in), _num(a_out)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    pooled = [f"{label} {_num(f['auc'])}" for label, f in blocks]
    lines.append("pooled AUC: " + "; ".join(pooled))
    lines.append("promise: right answers supported / hit@1 (answerable sets), unanswerable left unsupported (the others)")
    return "\n".join(lines)


def calibrate(
    eval_sets: list[Path] = SetsArg,
    folds: int = typer.Option(5, "--folds", help="folds of --cv kfold (stratified by set)"),
    cv: str | None = typer.Option(
        None,
        "--cv",
        help="sets: fit without each set in turn (and without each corpus), the default for two or more sets; "
        "corpora: without each corpus; kfold: stratified folds",
    ),
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
        method = cv or ("sets" if len(loaded) >= 2 else "kfold")
        with progress_display() as show:
            signals = gather_signals(eval_sets, loaded, base, corpus, query_keys(base), show)
        cases = case_support(signals, base)
        if len({c.right for c in cases}) < 2:
            raise LookupLabError("the sets give only right or only wrong top results: add answerable and unanswerable sets")
        what = (
            f"{base.embedding_model}, vector {base.vector_weight:g} lexical {base.lexical_weight:g} name {base.name_weight:g} "
            f"depth {base.candidate_depth} missing {base.missing_score}; "
            f"{', '.join(e.name for e in loaded)}"
        )
        result = fit_calibration(cases, cv=method, folds=folds, fitted_on=what)
    except LookupLabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    typer.echo(promise_table(result))
    m = result.model
    typer.echo(f"\nthreshold {m.threshold:.2f}; for retrieval/core/support.py SUPPORT_MODELS[{base.embedding_model!r}]:")
    typer.echo(f"SupportModel({m.intercept!r}, {m.weights!r}, {m.means!r}, {m.scales!r}, {m.threshold!r}, {m.fitted_on!r})")
