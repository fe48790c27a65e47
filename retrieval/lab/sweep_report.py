"""What a sweep says, as text: the points, the per-held-out-set tables and the best against the current settings.
The `sweep` CLI prints `summary`; the Sweep page shows `held_out_rows` and `settings_text`."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def settings_text(values: dict[str, Any]) -> str:
    """name=value, space-separated: how settings read in every text the lab prints."""
    return " ".join(f"{k}={_fmt(v) if isinstance(v, float) and v != round(v, 3) else v}" for k, v in values.items()) or "–"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]


HELD_OUT_COLUMNS = ("held out", "set", "mrr@10", "in-sample", "gap", "hit@1", "promise", "vs current", "chosen on the others")
PROMISE_NOTE = "promise: right answers supported / hit@1 (answerable sets), unanswerable left unsupported (the others)"


def held_out_rows(block: dict[str, Any]) -> list[dict[str, str]]:
    """One row per set a fold held out (a SetCrossValidation's to_dict), as text: the CLI and the Sweep page show these."""
    rows = []
    for r in block["rows"]:
        h, i, c = r["held_out"], r["in_sample"], r["current"]
        vs = None if h["mrr@10"] is None or c["mrr@10"] is None else h["mrr@10"] - c["mrr@10"]
        cells = [
            r["fold"],
            r["set"],
            _fmt(h["mrr@10"]),
            _fmt(i["mrr@10"]),
            "–" if r["gap"] is None else f"{r['gap']:+.3f}",
            _fmt(h["hit@1"]),
            _fmt(h["promise"]),
            ("–" if vs is None else f"{vs:+.3f}") + (" loses" if r["loses_to_current"] else ""),
            settings_text(r["chosen"]) if isinstance(r["chosen"], dict) else str(r["chosen"]),
        ]
        rows.append(dict(zip(HELD_OUT_COLUMNS, cells, strict=True)))
    return rows


def held_out_caption(block: dict[str, Any]) -> str:
    worst = "–" if block["worst_set"] is None else f"{block['worst_set']} {block['worst_mrr@10']:.3f}"
    return (
        f"{block['label']}, choosing by the {block['choose']} set: held-out mean mrr@10 {_fmt(block['mean_mrr@10'])}; "
        f"worst {worst}; largest gap to in-sample {_fmt(block['largest_gap'])}"
    )


def held_out_lines(validation: dict[str, Any]) -> list[str]:
    """The per-held-out-set tables of a sweep's validation (leave one set out, leave one corpus out)."""
    lines: list[str] = []
    for key in ("leave_one_set_out", "leave_one_corpus_out"):
        block = validation.get(key)
        if not block:
            continue
        rows = held_out_rows(block)
        lines += ["", held_out_caption(block) + ":", *_table([list(HELD_OUT_COLUMNS), *([*r.values()] for r in rows)])]
    if lines:
        lines.append("  " + PROMISE_NOTE)
    return lines


def summary(data: dict[str, Any], timings: dict[str, float]) -> str:
    """The terminal text: the points by mrr@10 (best first, at most 15), the held-out tables, then the best against
    the current settings."""
    names = list(data["grid"])
    cols = ["mrr@10", "hit@1", "recall@5", "correct_supported_rate", "unanswerable_unsupported_rate"]
    heads = [*names, "mrr@10", "hit@1", "recall@5", "right+supported", "unanswerable unsupported", "below current on"]
    rows = sorted(data["points"], key=lambda p: -(p["mrr@10"] or 0.0))[:15]
    table = [heads] + [
        [_fmt(p["settings"][n]) for n in names] + [_fmt(p[c]) for c in cols] + [", ".join(p["below_current"]) or "–"]
        for p in rows
    ]
    lines = _table(table)
    best, now, test, validation = data["best"], data["current"], data["best"]["vs_current"], data["validation"]
    p = "–" if test["p_value"] is None else f"{test['p_value']:.3g}"
    sets = ", ".join(f"{k} ({v['answerable']} answerable of {v['cases']}, {v['corpus']})" for k, v in data["sets"].items())
    lines += [
        "",
        f"sets: {sets}; {len(data['points'])} points; {data['queries_per_case']} Weaviate queries per case",
        f"validation: {validation['label']}",
    ]
    lines += held_out_lines(validation)
    kfold = validation.get("kfold")
    estimate = (
        f"held-out folds {kfold['cv_mean']:.4f} ± {kfold['cv_sd']:.4f} ({kfold['repeats']}×{kfold['folds']} folds; "
        f"training folds {kfold['training_mean']:.4f})"
        if kfold
        else f"held-out sets {_fmt(best['held_out_mean'])}"
    )
    lines += [
        "",
        f"best {settings_text(best['settings'])}: in-sample mrr@10 {best['in_sample']:.4f}; {estimate}",
        f"current {settings_text(now['settings'])}: mrr@10 {_fmt(now['mrr@10'])}; best − current {test['delta']:+.4f}, "
        f"p = {p} ({test['test']}, {test['cases']} cases){'' if test['significant'] else ', not significant'}",
    ]
    if best["below_current"]:
        lines.append(f"  the best is below the current settings on {', '.join(best['below_current'])}")
    lines.append(f"time: {timings['signals']:.1f} s signals, {timings['points']:.1f} s re-ranking")
    folds = sum(c["times"] for c in best["chosen"])
    for pick in best["chosen"][:5]:
        lines.append(f"  chosen in {pick['times']} of {folds} folds: {settings_text(pick['settings'])}")
    return "\n".join(lines)
