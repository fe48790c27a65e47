"""`python -m retrieval runs` and `compare`, and saving the eval command's run. `register(app)` adds the
commands to the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, JsonOpt, SettingsFileOpt, json_option, notice, renamed, settings_of
from retrieval.config import Settings
from retrieval.errors import LookupLabError
from retrieval.evals.configs import CONFIGS
from retrieval.evals.ranking_metrics import METRICS
from retrieval.lab.run_summary import HISTORY_SETTINGS

if TYPE_CHECKING:  # the CLI imports this module for every command: pandas and ranx load only where used
    from retrieval.evals.evaluation import EvalReport
    from retrieval.evals.sets import EvalSet
    from retrieval.lab.compare import RunComparison
    from retrieval.lab.run_summary import RunSummary

SHOWN_SETTINGS = HISTORY_SETTINGS  # as the Runs page's history shows them


def save_eval_run(report: EvalReport, eval_set: EvalSet, settings: Settings, *, source: str = "cli") -> str | None:
    """Save the run in the settings' DuckDB file; its run_id, or None (with the reason on stderr) when it cannot."""
    from retrieval.lab.runs import RunStore

    try:
        return RunStore(settings.invocation_db).save(report, eval_set, settings, source=source).run_id
    except LookupLabError as exc:
        typer.echo(f"error: the run was not saved: {exc}", err=True)
        return None


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _setting(value: Any) -> str:
    """A setting as saved; – when it is None (support_threshold: the model's) or the run was saved before it existed."""
    return "–" if value is None else str(value)


def runs_table(runs: list[RunSummary], config: str = "lookup") -> str:
    """One line per run: id, time, set, collection, the chosen configuration's metrics, the main settings."""
    lines = [f"{'run_id':<21} {'time (UTC)':<19} {'set':<28} {'mrr@10':>7} {'hit@1':>6} {'rec@5':>6}  settings"]
    for run in runs:
        m = run.metrics.get(config) or {}
        shown = " ".join(f"{k}={_setting(run.settings.get(k))}" for k in SHOWN_SETTINGS)
        lines.append(
            f"{run.run_id:<21} {run.created_at[:19].replace('T', ' '):<19} {run.eval_set[:28]:<28} "
            f"{_fmt(m.get('mrr@10')):>7} {_fmt(m.get('hit@1')):>6} {_fmt(m.get('recall@5')):>6}  {shown}"
        )
    return "\n".join(lines)


def comparison_text(cmp: RunComparison) -> str:
    a, b = cmp.run_a, cmp.run_b
    model_a, model_b = (_setting(m) for m in cmp.models)
    out = [
        f"A {a.run_id} ({a.eval_set}, {model_a}, {a.created_at[:19]})  →  "
        f"B {b.run_id} ({b.eval_set}, {model_b}, {b.created_at[:19]})",
        f"configuration {cmp.config}, {cmp.shared_cases} shared answerable cases; paired t-test on each metric",
    ]
    if cmp.settings_diff:
        changed = "; ".join(f"{k} {_setting(va)} → {_setting(vb)}" for k, (va, vb) in cmp.settings_diff.items())
        out.append("settings changed: " + changed)
    out.append(f"{'metric':<9} {'A':>6} {'B':>6} {'B−A':>7}  {'95% interval':<17} {'p':>6} {'d':>6}")
    for m in cmp.metrics:
        interval = "–" if m.ci_low is None else f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]"
        mark = " *" if m.significant else ""
        out.append(
            f"{m.metric:<9} {m.a:>6.3f} {m.b:>6.3f} {m.delta:>+7.3f}  {interval:<17} {_fmt(m.p_value):>6} "
            f"{_fmt(m.effect_size):>6}{mark}"
        )
    for label, changes in (("improved", cmp.improved), ("regressed", cmp.regressed)):
        out.append(f"{label} on {cmp.metric} ({len(changes)}):")
        out.extend(f"  {c.case_id}: rank {_fmt(c.rank_before)} → {_fmt(c.rank_after)}" for c in changes)
    out.append(f"unchanged: {cmp.unchanged}")
    if cmp.causes_a or cmp.causes_b:
        out.append("misses by cause, B against A: " + ("; ".join(cmp.cause_changes) or "the same"))
    out.extend(f"warning: {w}" for w in cmp.warnings)
    return "\n".join(out)


def register(app: typer.Typer) -> None:
    """Add `runs` and `compare` to the CLI."""
    app.command("runs")(runs_cmd)
    app.command("compare")(compare_cmd)


def runs_cmd(
    eval_set: str | None = typer.Option(None, "--set", help="only the runs of this eval set (its name)"),
    as_json: bool = json_option("print a JSON list"),
    config: Path | None = ConfigOpt,
    old_settings: Path | None = SettingsFileOpt,
) -> None:
    """List the saved eval runs, newest first."""
    from retrieval.lab.runs import RunStore

    config = renamed(config, old_settings, "--settings", "--config")
    with reported():
        found = RunStore(settings_of(config).invocation_db).list_runs(eval_set)
    if as_json:
        keys = (
            "run_id",
            "set",
            "time",
            "embedding_model",
            "settings",
            "metrics",
            "set_hash",
            "corpus",
            "collection",
            "code_version",
            "source",
        )
        typer.echo(json.dumps([{k: r.to_dict()[k] for k in keys} for r in found], ensure_ascii=False, default=str))
    elif not found:
        typer.echo("no saved runs" + (f" of eval set {eval_set}" if eval_set else ""))
    else:
        typer.echo(runs_table(found))


def compare_cmd(
    run_a: str = typer.Argument(..., help="the earlier run (run_id)"),
    run_b: str = typer.Argument(..., help="the run to judge against it (run_id)"),
    eval_config: str = typer.Option(
        "lookup", "--eval-config", help="the eval configuration compared (e.g. lookup, bm25): " + ", ".join(CONFIGS)
    ),
    metric: str = typer.Option(
        "mrr@10", "--metric", help="the metric for improved/regressed and the verdict: " + ", ".join(METRICS)
    ),
    as_json: bool = JsonOpt,
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="exit 1 when B is significantly worse (p < 0.05) on the metric"
    ),
    config: Path | None = ConfigOpt,
    old_settings: Path | None = SettingsFileOpt,
) -> None:
    """Metric deltas of B against A with a paired test on their shared cases, and the cases that moved."""
    from retrieval.lab.compare import compare_runs
    from retrieval.lab.runs import RunStore

    config, eval_config = _eval_config_given_as_config(config, eval_config)
    config = renamed(config, old_settings, "--settings", "--config")
    with reported():
        store = RunStore(settings_of(config).invocation_db)
        cmp = compare_runs(store, run_a, run_b, config=eval_config, metric=metric)
    typer.echo(json.dumps(cmp.to_dict(), ensure_ascii=False, default=str) if as_json else comparison_text(cmp))
    if fail_on_regression and cmp.regression:
        typer.echo(
            f"REGRESSION: {cmp.metric} fell by {-cmp.chosen.delta:.4f} from {cmp.run_a.run_id} to {cmp.run_b.run_id} "
            f"(p = {cmp.chosen.p_value:.4f})",
            err=True,
        )
        raise typer.Exit(1)


def _eval_config_given_as_config(config: Path | None, eval_config: str) -> tuple[Path | None, str]:
    """`compare --config NAME` named the eval configuration before --config meant the settings file: a NAME of a
    configuration that is no file still does, with a notice. The settings file and the eval configuration."""
    if config is None or config.is_file() or str(config) not in CONFIGS:
        return config, eval_config
    notice(f"compare --config {config}", f"--eval-config {config} (--config names the settings file)")
    return None, str(config)
