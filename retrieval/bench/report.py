"""`python -m retrieval bench`, the report: the goals, the ratios they are checked on, and the markdown table."""

from __future__ import annotations

import functools
from typing import Any

from retrieval.bench.common import QUIET_BELOW, QUIET_WINDOW_S

GOALS = {  # name: (comparison, target)
    "l0_p50_growth": ("<=", 2.0),
    "lookup_over_floor": ("<=", 1.3),
    "filtered_over_unfiltered": ("<=", 1.0),
    "filtered_recall": (">=", 0.98),  # filtered L1 against the exact filtered ranking, at the largest size
    "record_ms": ("<=", 1.0),
    "ingest_over_raw": (">=", 0.9),
    "ingest_over_floor": (">=", 0.8),  # the ingest's Weaviate-side rate over a bare insert of its chunks (bench/floors.py)
    "embed_over_floor": (">=", 0.9),  # the ingest's embedding rate over the model's best way on the same chunks
    "reingest_s": ("<=", 30.0),
    "reingest_chunks_embedded": ("<=", 0),
    "dashboard_query_max_ms": ("<", 200.0),
    "dashboard_page_load_ms": ("<", 300.0),  # the Invocations page's whole "all rows" load
    "store_insert_rows_per_s": (">=", 20_000),  # the invocation store's insert of the bench's rows
    "store_insert_peak_rss_mb": ("<=", 1500.0),
    "traffic_warm_max_ms": ("<=", 2000.0),  # the Traffic page's reads (as `traffic --json`), warm, slowest window
    "traffic_peak_rss_mb": ("<=", 1500.0),  # the process reading them: DuckDB's budget (1GB) and Python's share
    "model_load_s": ("<=", 1.0),  # a fresh Embedder, files in the OS cache
    "app_rss_mb": ("<=", 600.0),  # the streamlit process after one lookup
    "app_first_page_s": ("<=", 5.0),  # a cold start of the embedded default: server up to the first page drawn
    "app_warm_page_max_s": ("<=", 2.0),  # the slowest page opened a second time, on the bench's 1k corpus
    "cli_warm_lookup_s": ("<=", 1.5),  # `python -m retrieval lookup` wall, a standing server running (bench/cli_lookup.py)
    "cli_over_in_process": ("<=", 1.5),  # that, over a Python start-up importing the CLI plus one in-process lookup
    "explain_trace_ms": ("<=", 1000.0),  # one entry's trace (explain_entry) at the largest size, p95
    "causes_share_of_lookup": ("<=", 0.25),  # a miss's classification over the lookup's own time, p50 each
}
STAGES = ("l0", "embed", "l1", "fuse", "record")


def _explain_cell(s: dict) -> str:
    e = s.get("explain")
    if not e:
        return "n/a"
    return (
        f"{e['trace_p50_ms']} / {e['trace_p95_ms']}; {e['what_it_would_take_p50_ms']} / {e['what_it_would_take_p95_ms']} "
        f"(lookup {e['lookup_p50_ms']})"
    )


def _classify_cell(s: dict) -> str:
    e = s.get("explain")
    return "n/a" if not e else f"{e['classify_share_of_lookup']} ({e['classify_p50_ms']} / {e['lookup_p50_ms']})"


# The stage of the largest size whose 1-minute load average goes beside a goal (bench_size's "loadavg" keys)
GOAL_LOAD = {
    "l0_p50_growth": "l0",
    "lookup_over_floor": "lookups",
    "filtered_over_unfiltered": "lookups",
    "filtered_recall": "l1",
    "record_ms": "lookups",
    "ingest_over_raw": "ingest",
    "ingest_over_floor": "ingest",
    "embed_over_floor": "ingest",
    "reingest_s": "ingest",
    "reingest_chunks_embedded": "ingest",
}  # the lookup stages the bench times, in the table's order


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios_and_goals(
    sizes: dict[int, dict[str, Any]],
    store_fig: dict[str, Any] | None,
    *,
    model_load_s: float | None = None,
    app_rss_mb: float | None = None,
    l0_paired: dict[str, Any] | None = None,
    app_fig: dict[str, Any] | None = None,
    cli_fig: dict[str, Any] | None = None,
) -> tuple[dict, dict]:
    """The ratios, and every goal with its value and whether it is met (None: not measured in this run). L0's
    growth is `l0_paired`'s (the smallest and the largest size timed side by side) when given, else the ratio of
    the sizes' own p50s."""
    small, big = sizes[min(sizes)], sizes[max(sizes)]
    ratios = {
        "l0_p50_growth": l0_paired["growth"] if l0_paired else _ratio(big["l0"]["p50_ms"], small["l0"]["p50_ms"]),
        "lookup_over_floor": _ratio(big["lookup"]["p50_ms"], big["floor"]["p50_ms"]),
        "filtered_over_unfiltered": _ratio(big["l1"]["filtered_p50_ms"], big["l1"]["unfiltered_p50_ms"]),
        "record_ms": big["lookup"]["stages_p50_ms"]["record"],
        "reingest_s": big["ingest"]["reingest"]["seconds"],
    }
    over_raw = [s["ingest"]["over_raw"] for s in sizes.values() if s["ingest"]["over_raw"] is not None]
    values = {
        **ratios,
        "explain_trace_ms": (big.get("explain") or {}).get("trace_p95_ms"),
        "causes_share_of_lookup": (big.get("explain") or {}).get("classify_share_of_lookup"),
        "ingest_over_raw": min(over_raw, default=None),
        "ingest_over_floor": big["ingest"].get("over_floor"),
        "embed_over_floor": min(
            (s["ingest"]["embed_over_floor"] for s in sizes.values() if s["ingest"].get("embed_over_floor") is not None),
            default=None,
        ),
        "reingest_s": max(s["ingest"]["reingest"]["seconds"] for s in sizes.values()),
        "filtered_recall": big["l1"].get("filtered_recall"),
        "reingest_chunks_embedded": max(s["ingest"]["reingest"]["chunks_embedded"] for s in sizes.values()),
        "dashboard_query_max_ms": store_fig["query_max_ms"] if store_fig else None,
        "dashboard_page_load_ms": store_fig.get("page_load_ms") if store_fig else None,
        "store_insert_rows_per_s": store_fig.get("insert_rows_per_s") if store_fig else None,
        "store_insert_peak_rss_mb": store_fig.get("insert_peak_rss_mb") if store_fig else None,
        "traffic_warm_max_ms": (store_fig or {}).get("traffic_max_ms"),
        "traffic_peak_rss_mb": (store_fig or {}).get("traffic_peak_rss_mb"),
        "model_load_s": model_load_s,
        "app_rss_mb": app_rss_mb,
        **app_page_values(app_fig),
        "cli_warm_lookup_s": (cli_fig or {}).get("warm_s"),
        "cli_over_in_process": (cli_fig or {}).get("over_in_process"),
    }
    loads = app_page_loads(app_fig)
    if cli_fig and cli_fig.get("loadavg") is not None:
        loads.update(cli_warm_lookup_s=cli_fig["loadavg"], cli_over_in_process=cli_fig["loadavg"])
    goals = {}
    for name, (op, target) in GOALS.items():
        v = values[name]
        met = None if v is None else (v <= target if op == "<=" else v >= target if op == ">=" else v < target)
        load = big.get("loadavg", {}).get(GOAL_LOAD.get(name, ""))
        if name == "l0_p50_growth" and l0_paired:
            load = l0_paired.get("loadavg")
        if name.startswith("store_insert") and store_fig and store_fig.get("loadavg"):
            load = store_fig["loadavg"][0]  # the load as the insert ended
        if name.startswith("traffic") and store_fig and store_fig.get("traffic_loadavg"):
            load = store_fig["traffic_loadavg"][0]  # the load as the traffic reads ended
        if name in loads:
            load = loads[name]
        goals[name] = {"value": v, "goal": f"{op} {target}", "met": met, **({"loadavg": load} if load is not None else {})}
    return ratios, goals


def _slowest_warm(app_fig: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    pages = (app_fig or {}).get("pages") or {}
    return max(pages.items(), key=lambda kv: kv[1]["warm_s"]) if pages else None


def app_page_values(app_fig: dict[str, Any] | None) -> dict[str, float | None]:
    """The app's page goals: the cold first page of the embedded default, and the slowest warm page."""
    cold = (app_fig or {}).get("cold_first_page") or {}
    slowest = _slowest_warm(app_fig)
    return {"app_first_page_s": cold.get("s"), "app_warm_page_max_s": slowest[1]["warm_s"] if slowest else None}


def app_page_loads(app_fig: dict[str, Any] | None) -> dict[str, float]:
    cold = (app_fig or {}).get("cold_first_page") or {}
    slowest = _slowest_warm(app_fig)
    out = {}
    if cold.get("loadavg") is not None:
        out["app_first_page_s"] = cold["loadavg"]
    if slowest:
        out["app_warm_page_max_s"] = slowest[1]["loadavg"]
    return out


def _floor_cell(ingest: dict[str, Any]) -> str:
    floor = ingest.get("floor") or {}
    return "n/a" if floor.get("objects_per_s") is None else f"{floor['objects_per_s']} ({floor['objects']:,} objects)"


def _over_cell(ingest: dict[str, Any], rate: str, over: str) -> str:
    return "n/a" if ingest.get(rate) is None else f"{ingest[rate]}, {ingest.get(over)}"


def _embed_floor_cell(ingest: dict[str, Any]) -> str:
    floor = ingest.get("embed_floor")
    if not floor:
        return "n/a (synthetic vectors: nothing embedded)"
    shown = [f"{k}: {v}" for k, v in floor["ways"].items()]
    shown += [
        f"{k}: {v}, not usable (a quantized model's vector would depend on its batch)"
        for k, v in floor.get("batched_not_usable", {}).items()
    ]
    return f"{floor['chunks_per_s']} ({floor['best']}; " + ", ".join(shown) + ")"


def _recall_cell(l1: dict[str, Any]) -> str:
    detail = l1.get("filtered_recall_detail") or {}
    if l1.get("filtered_recall") is None:
        return "n/a"
    return f"{l1['filtered_recall']} ({detail.get('min', 'n/a')}; {detail.get('within_tie', 'n/a')})"


def _strategy_cell(label: str, size: dict[str, Any]) -> str:
    f = size.get("filter_strategies", {}).get(label)
    if f is None:
        return "n/a"
    agree = "" if f.get("agreement") is None else f", top-k agreement {f['agreement']}"
    return "{unfiltered_p50_ms} / {filtered_p50_ms}, {filtered_over_unfiltered} ({loadavg})".format(**f) + agree


def _model_and_app_lines(result: dict[str, Any]) -> list[str]:
    """The model's load and query-embedding times and the app's memory, as a small table."""
    if "query_embed_p50_ms" not in result:
        return []
    app = result.get("app") or {}
    rss = (
        f"{app['rss_mb']} (peak {app['peak_mb']}), {app.get('recorded')} lookup recorded, exit code {app.get('exit_code')}"
        if app.get("rss_mb") is not None
        else f"n/a: {app.get('why', 'not measured')}"
    )
    return [
        "| model and app | value |",
        "|---|---|",
        f"| embedding model | {result['embedding_model']} |",
        f"| model load s (a fresh Embedder) | {result['model_load_s']} |",
        f"| query embedding p50 / p95 ms ({result['query_embed_queries']} distinct queries; first call "
        f"{result['query_embed_first_ms']} ms) | {result['query_embed_p50_ms']} / {result['query_embed_p95_ms']} |",
        f"| app RSS MB after one lookup (streamlit run app.py, query typed in chromium) | {rss} |",
        "",
        *_page_lines(app),
        *_cli_lines(result.get("cli_lookup")),
    ]


def _disk_cell(size: dict[str, Any]) -> str:
    mb = size.get("weaviate_disk_mb")
    if mb is None:
        return "n/a"
    return f"{mb:,.0f}, {mb * 100_000 / size['entries']:,.0f}"


def _cli_lines(cli: dict[str, Any] | None) -> list[str]:
    """The CLI lookup's figures: warm (a standing server) against what a process cannot avoid, and cold."""
    if not cli:
        return []
    if cli.get("warm_s") is None:
        return [f"CLI lookup: not measured ({cli.get('why', 'unknown')})", ""]
    return [
        f"| CLI lookup ({cli['corpus']}, median of {cli['runs']}) | s |",
        "|---|---|",
        f"| `python -m retrieval lookup`, a standing server running (`server start`) | {cli['warm_s']} "
        f"(each: {', '.join(map(str, cli['warm_all_s']))}; load {cli['loadavg']}; "
        f"keeper answered: {'yes' if cli.get('keeper_answered') else 'no'}) |",
        f"| Python start-up: `python -c pass` / importing the CLI | {cli['python_s']} / {cli['startup_s']} |",
        f"| one lookup in an open process, p50 | {cli['in_process_ms'] / 1000:.3f} |",
        f"| warm CLI over (start-up importing the CLI + in-process lookup) | {cli['over_in_process']} |",
        f"| `python -m retrieval lookup` starting its own embedded server | {cli['cold_s']} (load {cli['cold_loadavg']}) |",
        "",
    ]


def _page_lines(app: dict[str, Any]) -> list[str]:
    """The app's page timings: the first pages (a cold start of the embedded default; the walked app, Weaviate by
    URL), then each page opened twice, each with its goal and the 1-minute load."""
    if not app.get("pages"):
        return []
    cold, first = app.get("cold_first_page") or {}, app.get("first_page") or {}
    goal = f"<= {GOALS['app_first_page_s'][1]}"
    if cold.get("s") is not None:
        cold_cells = f"{cold['s']} (L1 connected at {cold['l1_connected_s']}) | – | {goal} | {cold['loadavg']}"
    else:
        cold_cells = f"n/a: {cold.get('why', 'not measured')} | – | {goal} | –"
    by_url = f"{first.get('s', 'n/a')} | – | – | {first.get('loadavg', '–')}"
    lines = [
        f"| app page ({app.get('entries')} entries) | first s | warm s | goal | load |",
        "|---|---|---|---|---|",
        f"| first page after the server's start, embedded Weaviate starting cold | {cold_cells} |",
        f"| first page after the server's start, Weaviate by URL | {by_url} |",
    ]
    warm_goal = GOALS["app_warm_page_max_s"][1]
    for name, fig in app["pages"].items():
        lines.append(f"| {name} | {fig['first_s']} | {fig['warm_s']} | <= {warm_goal} warm | {fig['loadavg']} |")
    return [*lines, ""]


SIZE_ROWS: list[tuple[str, Any]] = [  # (figure, how to read it from a size's figures)
    ("body words", lambda s: s["body_words"]),
    ("chunks per entry", lambda s: s["chunks_per_entry"]),
    ("L0 build s", lambda s: s["l0"]["build_s"]),
    ("L0 patterns", lambda s: s["l0"]["patterns"]),
    ("L0 match p50 / p95 ms", lambda s: f"{s['l0']['p50_ms']} / {s['l0']['p95_ms']}"),
    ("L0 matches p50 / max", lambda s: f"{s['l0']['matches_p50']} / {s['l0']['matches_max']}"),
    ("lookup p50 / p95 ms", lambda s: f"{s['lookup']['p50_ms']} / {s['lookup']['p95_ms']}"),
    ("lookup cached-embedding p50 ms", lambda s: s["lookup"]["cached_p50_ms"]),
    ("stages p50 ms (l0/embed/l1/fuse/record)", lambda s: " / ".join(str(s["lookup"]["stages_p50_ms"][k]) for k in STAGES)),
    ("floor p50 / p95 ms (embed + the mode's bare queries)", lambda s: f"{s['floor']['p50_ms']} / {s['floor']['p95_ms']}"),
    (
        "bare queries of the mode p50 ms, limit the candidate depth d / the lookup's vector query bare (d entries grouped)",
        lambda s: f"{s['floor']['near_vector_p50_ms']} / {s['floor']['grouped_bare_p50_ms']}",
    ),
    ("L1 chunk hits fetched per wanted entry", lambda s: s["lookup"].get("fold_factor")),
    ("explain one entry p50 / p95 ms: the trace, what it would take (lookup p50 beside)", lambda s: _explain_cell(s)),
    ("a miss's cause over the lookup, p50 (classify ms / lookup ms)", lambda s: _classify_cell(s)),
    (
        "L1 unfiltered / filtered p50 ms (filtered: the domain's tenant of the partition)",
        lambda s: f"{s['l1']['unfiltered_p50_ms']} / {s['l1']['filtered_p50_ms']}",
    ),
    (
        "L1 filtered recall@k against the exact filtered ranking (min; within 0.002 of the k-th)",
        lambda s: _recall_cell(s["l1"]),
    ),
    ("ingest entries/s, chunks/s", lambda s: f"{s['ingest']['entries_per_s']}, {s['ingest']['chunks_per_s']}"),
    ("embedder raw chunks/s (same chunks)", lambda s: s["ingest"]["raw_chunks_per_s"]),
    ("ingest / raw", lambda s: s["ingest"]["over_raw"]),
    ("ingest floor objects/s (bare insert_many into a plain collection)", lambda s: _floor_cell(s["ingest"])),
    (
        "ingest Weaviate-side chunks/s, over the floor",
        lambda s: _over_cell(s["ingest"], "weaviate_chunks_per_s", "over_floor"),
    ),
    ("embedding floor chunks/s (the model's best way on a sample)", lambda s: _embed_floor_cell(s["ingest"])),
    (
        "ingest embedding chunks/s, over the floor",
        lambda s: _over_cell(s["ingest"], "embed_chunks_per_s", "embed_over_floor"),
    ),
    (
        "re-ingest s (chunks embedded)",
        lambda s: f"{s['ingest']['reingest']['seconds']} ({s['ingest']['reingest']['chunks_embedded']})",
    ),
    ("peak RSS MB (process, with model)", lambda s: s["peak_rss_mb"]),
    ("Weaviate server RSS MB peak", lambda s: (s["weaviate_rss_mb"] or {}).get("peak_mb", "n/a")),
    ("Weaviate disk MB for this size (collection and partition), per 100k entries", _disk_cell),
    ("load average 1 min, after each stage", lambda s: ", ".join(f"{k} {v}" for k, v in s.get("loadavg", {}).items())),
]


def _paired_and_quiet_lines(result: dict[str, Any]) -> list[str]:
    """L0 of the smallest and largest sizes side by side, and how long each size waited for a quiet server."""
    lines: list[str] = []
    paired = result.get("l0_paired")
    if paired:
        a, b = paired["sizes"]
        lines += [
            "",
            f"L0 of {a:,} and {b:,} entries timed side by side ({paired['passes']} passes over {paired['queries']} queries, "
            f"the l0_p50_growth goal): p50 {paired['small_p50_ms']} / {paired['big_p50_ms']} ms, "
            f"p95 {paired['small_p95_ms']} / {paired['big_p95_ms']} ms.",
        ]
    sizes = result["sizes"]
    quiet = {k: s["server_quiet"] for k, s in sizes.items() if (s.get("server_quiet") or {}).get("quiet") is not None}
    if quiet:
        lines += [
            "",
            f"Timing began once Weaviate used under {QUIET_BELOW} of a core over {QUIET_WINDOW_S:g} s after each ingest: "
            + ", ".join(
                f"{int(k):,} entries after {q['waited_s']} s ({'quiet' if q['quiet'] else 'NOT quiet'}, {q['cpu_share']})"
                for k, q in quiet.items()
            )
            + ".",
        ]
    return lines


def _store_lines(st: dict[str, Any] | None) -> list[str]:
    """The invocation store's dashboard queries, median ms per query and per call."""
    if not st:
        return []
    lines = [
        "",
        f"Invocation store: {st['rows']:,} rows ({st['file_mb']} MB, inserted at {st['insert_rows_per_s']:,} rows/s); "
        f"median ms per query over {max(st['runs'].values())} runs (1 where a call took over 5 s); "
        "'call' is the whole dashboard function, pandas included.",
        "",
    ]
    names = list(dict.fromkeys(n for qs in st["query_ms"].values() for n in qs))
    cases = list(st["query_ms"])
    lines += ["| query | " + " | ".join(cases) + " |", "|---" * (len(cases) + 1) + "|"]
    lines += [f"| {n} | " + " | ".join(str(st["query_ms"][c].get(n, "")) for c in cases) + " |" for n in names]
    lines += ["| call (total) | " + " | ".join(str(st["call_ms"][c]) for c in cases) + " |"]
    if st.get("traffic_warm_ms"):
        lines += [
            "| Traffic page reads, warm (first) | "
            + " | ".join(f"{st['traffic_warm_ms'][c]} ({st['traffic_first_ms'][c]})" for c in cases)
            + " |",
            "",
            f"Traffic page reads (estimate and feature counts, as `traffic --json`): median of the warm runs after a first, "
            f"goal <= {st['traffic_goal_ms']:g} ms; calls per window {st['traffic_calls']}; peak RSS "
            f"{st['traffic_peak_rss_mb']} MB (DuckDB within {st['memory_limit']}); load average {st['traffic_loadavg']}.",
        ]
    return lines


def render_table(result: dict[str, Any]) -> str:
    """The markdown tables of one run: per size, the goals, and the invocation-store queries."""
    m, sizes = result["machine"], result["sizes"]
    lines = [
        f"Lookup Lab bench, {result['date']}: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, "
        f"Weaviate {m['weaviate_server']}, load average {m['loadavg_start']} at start; queries {result['queries']} "
        f"per size (cold: different texts each run, seed {result['seed']}); peak RSS {result['peak_rss_mb']} MB "
        "(includes the embedding model).",
        *([f"{result['corpus_vectors']}", ""] if result.get("corpus_vectors", "real") != "real" else [""]),
        *_model_and_app_lines(result),
    ]
    rows = list(SIZE_ROWS)
    keys = list(sizes)
    for label in next((list(s["filter_strategies"]) for s in sizes.values() if "filter_strategies" in s), []):
        rows.append((f"L1 unfiltered / where-filtered p50 ms, ratio (load): {label}", functools.partial(_strategy_cell, label)))
    lines += ["| figure | " + " | ".join(f"{int(k):,} entries" for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(str(get(sizes[k])) for k in keys) + " |" for label, get in rows]
    lines += _paired_and_quiet_lines(result)
    if result.get("stopped"):
        lines += ["", f"**Stopped:** {result['stopped']['why']}."]
    lines += ["", "| goal | value | target | met | load average (1 min) |", "|---|---|---|---|---|"]
    lines += [
        f"| {name} | {g['value']} | {g['goal']} | {'yes' if g['met'] else 'n/a' if g['met'] is None else 'NO'} "
        f"| {g.get('loadavg', 'n/a')} |"
        for name, g in result["goals"].items()
    ]
    lines += _store_lines(result.get("invocation_store"))
    return "\n".join(lines)
