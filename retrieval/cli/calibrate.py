"""`python -m retrieval calibrate`: fit the support estimate to eval sets, with held-out-fold figures."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt
from retrieval.cli.sweep import CorpusOpt, JsonOpt, gather_signals


def register(app: typer.Typer) -> None:
    """Add `calibrate` to the CLI."""
    app.command("calibrate")(calibrate)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


HELD_OUT = {"sets": "each set fitted without it", "corpora": "each corpus fitted without it", "kfold": "stratified folds"}


def promise_table(result) -> str:
    """Per set: its promise in-sample and held out (by the calibration's cv, and by corpus), and its AUC; each
    promise against its target (right answers supported / hit@1 >= 0.90, unanswerable left unsupported >= 0.85)."""
    from retrieval.lab.calibration import (
        ANSWER_REMOVED,
        CORRECT_SUPPORTED_TARGET,
        SIBLING_TARGET,
        UNANSWERABLE_UNSUPPORTED_TARGET,
    )

    blocks = [("in-sample", result.in_sample), (HELD_OUT[result.cv], result.held_out)]
    if result.held_out_corpora is not None:
        blocks.append((HELD_OUT["corpora"], result.held_out_corpora))
    head = ["set", "target", *[label for label, _ in blocks], "AUC in-sample", "AUC held out"]
    rows = [head]
    answerable = dict(result.in_sample.get("answerable", {}))
    for name in result.in_sample["promises"]:
        if name.endswith(ANSWER_REMOVED):
            target = SIBLING_TARGET
        else:
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
    lines.append(
        "promise: right answers supported / hit@1 (answerable sets), unanswerable left unsupported (the others; "
        f"'{ANSWER_REMOVED.strip()}': an answerable set's queries with their answer taken out)"
    )
    return "\n".join(lines)


def calibrate(
    eval_sets: list[Path] = typer.Argument(None, help="eval set YAML files (answerable and unanswerable); none with --self"),
    self_fit: bool = typer.Option(
        False, "--self", help="fit the current knowledge base's support baselines on its own probes (no labels) and keep them"
    ),
    keep_title: bool = typer.Option(
        False, "--keep-title", help="with --self: probes keep their entry's title line (a measurement; nothing is kept)"
    ),
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
    """Fit the support estimate of the current model and weights to answerable and unanswerable eval sets; print its AUC,
    promises and calibration in-sample and held out, and the model for retrieval/core/support.py.
    With --self: fit the current knowledge base's baselines on its own probes, without labels."""
    from retrieval.config import load_settings
    from retrieval.errors import LookupLabError

    with reported():
        base = load_settings(config_file=config, corpus_dir=corpus)
        if self_fit:
            _self_calibration(base, keep_title=keep_title, as_json=as_json)
            return
        if not eval_sets:
            raise LookupLabError(
                "give eval sets to fit the support estimate on, or --self to fit this knowledge base's baselines"
            )
        result, norms = _labelled(base, eval_sets, corpus, folds, cv)
    if as_json:
        typer.echo(json.dumps({**result.to_dict(), "baselines": {k: n.to_dict() for k, n in norms.items()}}, ensure_ascii=False))
        return
    typer.echo(promise_table(result))
    typer.echo(calibration_table(result))
    m = result.model
    typer.echo(f"\nthreshold {m.threshold:.2f}; for retrieval/core/support.py SUPPORT_MODELS[{base.embedding_model!r}]:")
    typer.echo(
        f"SupportModel({m.intercept!r}, {m.weights!r}, {m.means!r}, {m.scales!r}, {m.threshold!r}, {m.fitted_on!r}, "
        f"{m.calibration!r})"
    )
    if norms:
        typer.echo("\nthe knowledge bases' baselines (similarity, BM25F per word: intercept, slope over log words):")
        for name, n in norms.items():
            typer.echo(f"  {name}: {n.to_dict()['baselines']} ({n.probes} probe runs)")


def _labelled(base, eval_sets: list[Path], corpus: Path | None, folds: int, cv: str | None):
    from retrieval.errors import LookupLabError
    from retrieval.evals.sets import load_eval_set
    from retrieval.lab.calibration import calibrate as fit_calibration
    from retrieval.lab.calibration import case_support, signal_keys
    from retrieval.progress import progress_display

    loaded = [load_eval_set(p) for p in eval_sets]
    if folds < 2:
        raise LookupLabError(f"--folds {folds}: a cross-validation needs at least 2 folds")
    method = cv or ("sets" if len(loaded) >= 2 else "kfold")
    with progress_display() as show:
        signals = gather_signals(eval_sets, loaded, base, corpus, signal_keys(base), show)
    cases = case_support(signals, base)
    if len({c.right for c in cases if not c.derived}) < 2:
        raise LookupLabError("the sets give only right or only wrong top results: add answerable and unanswerable sets")
    what = (
        f"{base.embedding_model}, vector {base.vector_weight:g} lexical {base.lexical_weight:g} name {base.name_weight:g} "
        f"depth {base.candidate_depth} missing {base.missing_score}; "
        f"{', '.join(e.name for e in loaded)}"
    )
    norms = {c.corpus: c.norms for c in cases if c.norms is not None}
    return fit_calibration(cases, cv=method, folds=folds, fitted_on=what, embedding_model=base.embedding_model), norms


def _self_calibration(settings, *, keep_title: bool, as_json: bool) -> None:
    """Probe the knowledge base, fit its baselines and keep them with the collection (not with --keep-title)."""
    from retrieval.core.self_calibration import SelfCalibration, self_calibrate
    from retrieval.core.support import support_model
    from retrieval.errors import LookupLabError
    from retrieval.progress import in_units, progress_display
    from retrieval.services import open_runtime, refresh_support_fit
    from retrieval.store import indexing

    runtime = open_runtime(settings, record=False, log=lambda m: typer.echo(m, err=True))
    try:
        services = runtime.services
        if services.store is None or services.embedder is None:
            raise LookupLabError(f"the support calibration needs L1: {services.l1_unavailable or 'L1 is off'}")
        with progress_display() as show:
            indexing.ingest(services.store, runtime.corpus, services.embedder, progress=show)
            result: SelfCalibration | None
            if keep_title:
                result = self_calibrate(
                    runtime.corpus.entries, services, settings, progress=in_units(show, "probes"), keep_title=True
                )
            else:
                result = refresh_support_fit(runtime, progress=in_units(show, "probes"), force=True)
        if result is None:
            raise LookupLabError("the support calibration did not run: L1 is not connected")
    finally:
        runtime.close()
    model = support_model(settings.embedding_model)
    data = {**result.to_dict(model, settings.support_threshold), "kept": not keep_title and result.norms is not None}
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False))
        return
    typer.echo(self_table(data, settings.collection))


def self_table(data: dict, collection: str) -> str:
    """A self-calibration in words: per probe style, how often the entry came first, and the claim on its runs."""
    head = ["style", "probes", "entry first", "right supported", "removed unsupported", "sim with", "sim removed"]
    rows = [head]
    for style, f in data["styles"].items():
        rows.append(
            [
                style,
                str(f["probes"]),
                _num(f["entry_first"]),
                _num(f.get("right_supported")),
                _num(f.get("removed_unsupported")),
                _num(f["mean_similarity_with"]),
                _num(f["mean_similarity_removed"]),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"{data['probes']} probes, {data['searches']} L1 query pairs in {data['seconds']:.1f} s")
    if data["norms"] is not None:
        kept = f"kept with collection {collection}" if data["kept"] else "measured only, not kept"
        lines.append(f"baselines {data['norms']['baselines']} (fit {data['fit']['id']}): {kept}")
    lines.extend(data["notes"])
    return "\n".join(lines)


def calibration_table(result) -> str:
    """Per set and per corpus: the predicted hit@1 (mean estimate) beside the measured one, and the expected
    calibration error, in-sample and held out."""
    blocks = [("in-sample", result.in_sample), (HELD_OUT[result.cv], result.held_out)]
    rows = [["set or corpus", *[f"{label}: predicted / hit@1 / ECE" for label, _ in blocks]]]
    for key, kind in (("reliability_per_set", ""), ("reliability_per_corpus", "corpus ")):
        for name in result.in_sample[key]:
            cells = []
            for _, figures in blocks:
                r = figures.get(key, {}).get(name)
                cells.append("–" if r is None else f"{r['predicted_hit1']:.3f} / {r['hit1']:.3f} / {r['ece']:.3f}")
            rows.append([kind + name, *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n" + "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
