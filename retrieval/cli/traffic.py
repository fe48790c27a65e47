"""`python -m retrieval traffic`: the label-free estimate of the recorded traffic's quality and its feature counts, over a
window of calls, with a gate for scripts (`--min-estimate`)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import ConfigOpt, JsonOpt
from retrieval.errors import TrafficError

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.traffic.estimate import Estimate, TrafficEstimate
    from retrieval.traffic.features import FeatureCounts
    from retrieval.traffic.mix import MixReport

_SPAN = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register(app: typer.Typer) -> None:
    """Add the `traffic` command to the CLI."""
    app.command("traffic")(traffic_cmd)


def parse_moment(text: str, option: str, now: datetime | None = None) -> datetime:
    """'7d', '24h', '30m', '2w' ago, or an ISO date or time (UTC when it names no zone). TrafficError names the value."""
    now = now or datetime.now(UTC)
    span = _SPAN.fullmatch(text.strip().lower())
    if span:
        return now - timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TrafficError(
            f"{option} {text!r}: expected a span back from now (30m, 24h, 7d, 2w) or an ISO date or time (2026-03-01)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def traffic_cmd(
    since: str | None = typer.Option(None, "--since", help="calls from this long ago (30m, 24h, 7d) or an ISO date"),
    until: str | None = typer.Option(None, "--until", help="calls before this (same forms as --since)"),
    session: list[str] = typer.Option([], "--session", help="only calls of this session tag (repeatable)"),
    collection: str | None = typer.Option(None, "--collection", help="only calls that searched this Weaviate collection"),
    as_json: bool = JsonOpt,
    min_estimate: float | None = typer.Option(None, "--min-estimate", help="exit 1 when the estimated hit@1 is below this"),
    eval_set: list[Path] = typer.Option(
        [], "--eval-set", help="set the calls beside this eval set, its cases looked up unrecorded (repeatable)"
    ),
    config: Path | None = ConfigOpt,
) -> None:
    """The estimated hit@1 of the recorded calls (mean support estimate, with its interval and calibration), the share
    answered without semantic support and the fallback rate, per day, session tag and domain; and the calls' features."""
    from retrieval.config import db_budget, load_settings
    from retrieval.records.dashboard import InvocationFilter
    from retrieval.records.invocations import InvocationStore
    from retrieval.traffic.estimate import traffic_estimate
    from retrieval.traffic.reading import traffic_feature_counts

    with reported():
        flt = InvocationFilter(
            since=None if since is None else parse_moment(since, "--since"),
            until=None if until is None else parse_moment(until, "--until"),
            session_tags=tuple(session),
        )
        settings = load_settings(config_file=config)
        store = InvocationStore(settings.invocation_db, budget=db_budget(settings))
        with store.reading():
            estimate = traffic_estimate(store, flt, collection)
            counts = traffic_feature_counts(store, flt, collection)
        mix = beside_eval_sets(settings, counts, eval_set) if eval_set else None
    if as_json:
        out = {"estimate": estimate.to_dict(), "features": counts, "mix": None if mix is None else mix.to_dict()}
        typer.echo(json.dumps(out, ensure_ascii=False))
    else:
        typer.echo(estimate_text(estimate) + "\n\n" + features_text(counts) + ("" if mix is None else "\n\n" + mix_text(mix)))
    got = estimate.overall.hit_at_1
    if min_estimate is not None and (got is None or got < min_estimate):
        shown = "none (no call carries a support estimate)" if got is None else f"{got:.4f}"
        typer.echo(f"GATE FAILED: estimated hit@1 {shown} is below the threshold {min_estimate}", err=True)
        raise typer.Exit(1)


def _line(e: Estimate, width: int) -> str:
    figure = "–" if e.hit_at_1 is None else f"{e.hit_at_1:.3f} [{e.low:.3f}–{e.high:.3f}]"
    drop = "  DROP" if e.drop else ""
    return (
        f"  {e.key:<{width}}  {figure:<21}  {e.calls:>8,} calls  unsupported {e.unsupported_share:>4.0%}  "
        f"fallback {e.fallback_rate:>4.0%}  no estimate {e.no_estimate:,}{drop}"
    )


def estimate_text(est: TrafficEstimate) -> str:
    """The estimate in text: overall, then per day, session tag and domain."""
    from retrieval.traffic.estimate import INTERVAL, calibration_words

    o = est.overall
    head = "–" if o.hit_at_1 is None else f"{o.hit_at_1:.3f} (95% interval {o.low:.3f}–{o.high:.3f})"
    lines = [
        f"Estimated hit@1 (a label-free estimate, not a measurement): {head}",
        f"  over {o.calls:,} calls in the window ({est.window}); {o.estimated_calls:,} carry a support estimate",
        f"  answered without semantic support: {o.unsupported_share:.1%}   fallback rate: {o.fallback_rate:.1%}",
        f"  calibration: {calibration_words(est.calibration)}",
        f"  interval: {INTERVAL}",
    ]
    for title, rows in (
        ("per day (UTC)", est.per_day),
        ("per session tag", est.per_tag),
        ("per domain (top result)", est.per_domain),
    ):
        width = max((len(r.key) for r in rows), default=0)
        lines += ["", f"Estimate {title}:", *(_line(r, width) for r in rows)]
    if est.drops:
        lines.append(f"  drops (below the previous days' interval): {', '.join(est.drops)}")
    return "\n".join(lines)


def features_text(counts: FeatureCounts) -> str:
    """Each feature's bins with their share of the calls."""
    lines = ["Traffic features (share of the calls):"]
    for feature, bins in counts.items():
        total = sum(bins.values()) or 1
        shown = ", ".join(f"{label} {n / total:.0%}" for label, n in bins.items() if n)
        lines.append(f"  {feature}: {shown}")
    return "\n".join(lines)


def beside_eval_sets(settings: Settings, traffic: FeatureCounts, paths: list[Path]) -> MixReport:
    """The calls' features beside those of the eval sets' cases, looked up unrecorded on the settings' corpus."""
    from retrieval.evals.sets import load_eval_set
    from retrieval.services import open_runtime
    from retrieval.traffic.eval_side import eval_feature_counts
    from retrieval.traffic.mix import mix_report

    sets = [load_eval_set(p) for p in paths]
    runtime = open_runtime(settings, record=False, log=lambda m: typer.echo(m, err=True))
    try:
        corpus = f"collection {runtime.settings.collection}"
        evals = eval_feature_counts(sets, runtime.services, runtime.settings.options(), corpus=corpus)
    finally:
        runtime.close()
    return mix_report(traffic, evals, set_names=[p.stem for p in paths])


def mix_text(mix: MixReport) -> str:
    """The largest difference in words, the style the eval sets lack, and each feature's divergence."""
    from retrieval.traffic.mix import DIVERGENCE

    lines = [f"Traffic beside the eval sets ({', '.join(mix.set_names)}):", f"  {mix.sentence}"]
    if mix.lacking is not None:
        lines.append(f"  {mix.lacking.sentence}")
    lines.append(f"  divergence per feature ({DIVERGENCE}):")
    lines += [f"    {m.feature:<14} {m.divergence:.3f}  {m.sentence}" for m in mix.features]
    return "\n".join(lines)
