"""Picking an eval set, and checking it fits what is loaded (Filter comparison and Evaluate share this)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from retrieval.errors import LookupLabError
from retrieval.evals.catalog import EvalSetFile, eval_set_files, preferred_eval_set, same_path
from retrieval.evals.configs import CONFIGS
from retrieval.evals.sets import EvalSet, corpus_fit, load_eval_set
from retrieval.evals.settings_strip import CONFIG_MEANING, config_meaning
from retrieval.lab import judgments
from retrieval.types.modes import LookupMode

from . import ingest, keys, render, resources
from .render import md
from .setting_widgets import RANKING_WIDGETS


def known_set_files(settings) -> list[EvalSetFile]:
    """eval_sets/*.yaml of the repo, ../shared/eval_sets/*.yaml, then the sets judged in the app (judged/…)."""
    return [*eval_set_files(), *judgments.judged_set_files(settings.judged_sets_dir)]


def preselected(files: list[EvalSetFile], ctx: resources.AppContext) -> int:
    """The user's last choice of eval set on this corpus (on any page), else the largest set that fits."""
    last = st.session_state.get(keys.LAST_EVAL_SET)
    labels = [f.label for f in files]
    if last is not None and last[0] == str(ctx.settings.corpus_dir) and last[1] in labels:
        return labels.index(last[1])
    return preferred_eval_set(files, ctx.settings.corpus_dir, [e.entry_id for e in ctx.corpus.entries])


def remember(ctx: resources.AppContext, label: str) -> None:
    st.session_state[keys.LAST_EVAL_SET] = (str(ctx.settings.corpus_dir), label)


def pick_eval_set(ctx: resources.AppContext, *, key: str) -> tuple[EvalSet, Path] | None:
    """A selectbox over the known sets (known_set_files); the loaded set, or None (with a message)."""
    files = known_set_files(ctx.settings)
    if not files:
        st.info("No eval sets found: put YAML files in eval_sets/ (cases: [{id, query, expected, domain}]).")
        return None
    by_label = {f.label: f.path for f in files}
    label = st.selectbox(
        "Eval set",
        list(by_label),
        index=preselected(files, ctx),
        key=key,
        bind="query-params",
        help="eval_sets/*.yaml of the repo, ../shared/eval_sets/*.yaml and the sets judged in the app (judged/…). "
        "Your last choice is kept; at first the largest set written for the loaded corpus is preselected.",
    )
    remember(ctx, label)
    path = by_label[label]
    try:
        return load_eval_set(path), path
    except LookupLabError as exc:
        render.error("The eval set cannot be used", exc, "Fix the file and field named above, then rerun.")
        return None


def pick_fitting_set(ctx: resources.AppContext, *, key: str) -> tuple[EvalSet, Path] | None:
    """The picked eval set with its description, when it fits the loaded corpus; None (with a message) otherwise."""
    picked = pick_eval_set(ctx, key=key)
    if picked is None:
        return None
    eval_set, path = picked
    st.caption(md(eval_set.description))
    return picked if fits_loaded_corpus(ctx, eval_set, path) else None


def _switch_corpus(label: str) -> None:
    st.session_state[keys.CORPUS] = label
    st.session_state.pop(keys.SET_COMPARISON, None)
    st.session_state.pop(keys.EVAL_REPORT, None)


def fits_loaded_corpus(ctx: resources.AppContext, eval_set: EvalSet, path: Path) -> bool:
    """True when every entry the eval set expects exists in the loaded corpus (whatever path its `corpus:`
    field names). Otherwise says how many are missing and, when the corpus it names is known, offers to
    switch to it (in its own collection)."""
    fit = corpus_fit(eval_set, (e.entry_id for e in ctx.corpus.entries))
    if fit.fits:
        return True
    shown = ", ".join(fit.missing[:5]) + (f" and {len(fit.missing) - 5} more" if len(fit.missing) > 5 else "")
    named = (
        f" It is written for the corpus **{md(eval_set.corpus_dir.name)}**."
        if eval_set.corpus_dir is not None and not same_path(eval_set.corpus_dir, ctx.settings.corpus_dir)
        else ""
    )
    st.warning(
        f"**{md(eval_set.name)}** does not fit the loaded corpus **{md(ctx.corpus.root)}**: "
        f"{len(fit.missing)} of its {fit.expected} expected entries are not in it ({md(shown)}).{named}",
        icon=":material/swap_horiz:",
    )
    wanted = None
    if named:
        choices = resources.corpus_choices(resources.base_settings())
        wanted = next((c for c in choices if same_path(c.path, eval_set.corpus_dir)), None)
        if wanted is None:
            st.caption(
                f"{md(eval_set.corpus_dir)} is not a known corpus folder: add it with *Add a folder* on the Corpus page, "
                "or start the app with LOOKUP_CORPUS_DIR set to it."
            )
    if wanted is not None:
        st.button(
            f"Switch to corpus {wanted.label} (collection {wanted.collection})",
            type="primary",
            key="switch_corpus",
            on_click=_switch_corpus,
            args=(wanted.label,),
        )
    else:
        st.caption("Fix the expected ids, or load the corpus the eval set was written for.")
    return False


def offer_ingest(ctx: resources.AppContext, *, key: str) -> None:
    """When the collection holds fewer entries than the corpus, say so and offer to ingest (with progress)."""
    ingest.show_last_result()
    indexed, _, why = resources.collection_summary(ctx)
    if why is not None or indexed is None or indexed >= len(ctx.corpus.entries):
        return
    st.warning(
        f"Collection **{md(ctx.settings.collection)}** holds {indexed} of {len(ctx.corpus.entries)} entries "
        "of this corpus: ingest it first, or the results measure a partial index.",
        icon=":material/upload:",
    )
    if ctx.read_only:
        st.caption(f"Ingest is off: the app is read-only ({md(ctx.access.reason)}).")
        return
    if st.button(f"Ingest {len(ctx.corpus.entries)} entries into {ctx.settings.collection}", key=key) and ingest.run_ingest(ctx):
        st.rerun()


REFERENCE = "lookup"  # always runs when L1 is there: the tool itself, and what every other configuration is tested against


def pick_configs(settings, *, l1_ready: bool) -> list[str]:
    """The configurations of the next run, in CONFIGS order: `lookup` always (when L1 is there), the others as
    picked. The box's labels never follow the sidebar: a label that changed dropped its chip from the next run."""
    if not l1_ready:
        st.multiselect("Configurations", ["l0_only"], default=["l0_only"], key=f"{keys.EVAL_CONFIGS}-False", disabled=True)
        return ["l0_only"]
    st.markdown(
        f"**`{REFERENCE}`** always runs: {md(config_meaning(REFERENCE, settings))}. It is the reference of the "
        "significance tests; pick what to run beside it."
    )
    others = [c for c in CONFIGS if c != REFERENCE]
    picked = st.multiselect(
        f"Configurations beside {REFERENCE}",
        others,
        default=others,
        key=f"{keys.EVAL_CONFIGS}-True",
        help="\n".join(f"- `{c}`: {CONFIG_MEANING[c]}" for c in others),
        wrap=True,
    )
    st.caption("; ".join(f"`{c}`: {md(CONFIG_MEANING[c])}" for c in picked))
    return [c for c in CONFIGS if c in picked or c == REFERENCE]


def eval_set_label(path: Path) -> str:
    return path.name


def run_view(settings, *, label: str, **more: str) -> dict[str, str]:
    """What a stored eval-set result was computed with, named for people (see settings_changed)."""
    view = {
        "eval set": label,
        "corpus": Path(settings.corpus_dir).name,
        "collection": settings.collection,
        "embedding model": settings.embedding_model,
        "top-k": str(settings.top_k),
        "search mode": settings.search_mode,
    }
    if settings.search_mode is LookupMode.HYBRID:
        view["alpha"] = str(settings.hybrid_alpha)
    view.update({w.field: str(getattr(settings, w.field)) for w in RANKING_WIDGETS})  # the sidebar's expander
    return {**view, **more}


def settings_changed(stored: dict[str, str], view: dict[str, str]) -> bool:
    """When the settings differ from those of the result on screen: say so, naming what changed. The result
    stays on screen until the user runs again."""
    changed = [
        f"{name} {stored.get(name, '—')} → {view.get(name, '—')}"
        for name in dict.fromkeys([*stored, *view])
        if stored.get(name) != view.get(name)
    ]
    if not changed:
        return False
    st.warning(
        f"**Settings changed — run again.** The results below are from the last run; since then: {md('; '.join(changed))}.",
        icon=":material/update:",
    )
    return True


def save_run(ctx: resources.AppContext, report, eval_set: EvalSet) -> str | None:
    """Save the run in the invocation store's DuckDB file (the Runs page lists it); its run_id, or None with a
    warning when it cannot be saved."""
    from retrieval.lab.runs import RunStore

    try:
        return RunStore(ctx.settings.invocation_db).save(report, eval_set, ctx.settings, source="app").run_id
    except LookupLabError as exc:
        st.warning(f"The run was not saved: {md(str(exc))}", icon=":material/warning:")
        return None
