"""The load bench's goals and its table: each figure with the 1-minute load average beside it."""

from __future__ import annotations

from typing import Any

GOAL_P99_OVER_P50 = 3.0
GOAL_SOAK_GROWTH_PCT = 10.0


def _goal(value: Any, goal: str, met: bool) -> dict[str, Any]:
    return {"value": value, "goal": goal, "met": met}


def load_goals(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets: no errors, every answered call recorded, p99 <= 3 x p50; under a kill, lost <= in flight
    and no Weaviate left behind; in a soak, RSS growth <= 10% from minute 2 to the end."""
    calls, rec, load = result["all_calls"], result["records"], result["load"]
    goals: dict[str, Any] = {}
    if "kill" in result:
        lost = calls["answered"] - rec["recorded"]
        goals["lost_calls"] = _goal(lost, f"<= {result['kill']['in_flight']} in flight", lost <= result["kill"]["in_flight"])
        for key in ("weaviate_left_after_kill", "weaviate_left_after_stop"):
            if result.get(key) is not None:
                goals[key] = _goal(result[key], "False", not result[key])
        return goals
    errors = sum(calls["errors"].values())
    goals["errors"] = _goal(errors, "0", errors == 0)
    goals["recorded_vs_answered"] = _goal(
        f"{rec['recorded']} of {calls['answered']}",
        "equal, ids distinct",
        rec["recorded"] == calls["answered"] == rec["distinct_ids"],
    )
    ratio = load["p99_over_p50"]
    goals["p99_over_p50"] = _goal(ratio, f"<= {GOAL_P99_OVER_P50}", ratio is not None and ratio <= GOAL_P99_OVER_P50)
    growth = result.get("soak", {}).get("rss_growth_pct_from_minute_2")
    if growth is not None:
        goals["soak_rss_growth_pct"] = _goal(growth, f"<= {GOAL_SOAK_GROWTH_PCT}", growth <= GOAL_SOAK_GROWTH_PCT)
    return goals


def _phase_rows(name: str, f: dict[str, Any]) -> list[str]:
    load = f"{f['load_1m_start']} -> {f['load_1m']}"
    errors = ", ".join(f"{k}: {n}" for k, n in f["errors"].items()) or "none"
    return [
        f"| {name}: calls answered / calls per s | {f['answered']} in {f['seconds']} s / {f['calls_per_s']} | {load} |",
        f"| {name}: p50 / p95 / p99 ms (p99/p50) | {f['p50_ms']}"
        f" / {f['p95_ms']} / {f['p99_ms']} ({f['p99_over_p50']}) | {load} |",
        f"| {name}: errors by kind | {errors} | {load} |",
    ]


def render_load_table(result: dict[str, Any]) -> str:
    m, plan = result["machine"], result["plan"]
    where = "one `serve --transport http`" if plan["transport"] == "http" else "one `serve` (stdio) per client"
    lines = [
        f"Lookup Lab load bench, {result['date']}: {m['cpu']}, {m['cores']} cores; {plan['clients']} MCP SDK clients x "
        f"{plan['calls']} lookup_knowledge calls (after one warm-up call each) against {where}, sample corpus "
        f"({result.get('entries')} entries); load average (1 min) beside each figure, at the phase's start -> end.",
        "",
        "| figure | value | load (1 min) |",
        "|---|---|---|",
        *_phase_rows("load", result["load"]),
    ]
    if "soak" in result:
        s = result["soak"]
        lines += _phase_rows(f"soak at {s['target_calls_per_s']} calls/s", s)
        lines += [f"| soak minute {r['minute']}: server RSS MB | {r['rss_mb']} | {r['load_1m']} |" for r in s["rss"]]
        lines.append(f"| soak: RSS growth from minute 2 to the end | {s['rss_growth_pct_from_minute_2']}% | |")
    calls, rec = result["all_calls"], result["records"]
    lines += [
        f"| calls answered (warm-ups included) / errors | {calls['answered']} / {sum(calls['errors'].values())} | |",
        f"| rows recorded after the stop (distinct ids) / left in the spool | {rec['recorded']} ({rec['distinct_ids']}) "
        f"/ {rec['waiting_in_spool']} | |",
    ]
    if "kill" in result:
        k = result["kill"]
        lines += [
            f"| kill -9: answered at the kill / in flight | {k['answered_at_kill']} / {k['in_flight']} | {k['load_1m']} |",
            f"| kill -9: lost (answered - recorded after a restart) | {calls['answered'] - rec['recorded']} | |",
            f"| Weaviate left after the kill / after the restart's stop | {result.get('weaviate_left_after_kill')} / "
            f"{result.get('weaviate_left_after_stop')} | |",
        ]
    lines.append(f"| server exit code after SIGTERM | {result.get('exit_code')} | |")
    lines += ["", "| goal | value | target | met |", "|---|---|---|---|"]
    lines += [f"| {n} | {g['value']} | {g['goal']} | {'yes' if g['met'] else 'NO'} |" for n, g in result["goals"].items()]
    return "\n".join(lines)
