"""The sidebar's setting widgets, one row each: the key (also the URL parameter), the Settings field it sets, and
how its value becomes the field's and the URL's text. The corpus row has no `parse`: it is picked by label."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.config import Settings
from retrieval.types.models import MODELS
from retrieval.types.modes import LookupMode, MissingScore, values

from . import keys


def _one_of(choices: Collection[str]) -> Callable[[Any], Any]:
    """A widget value that is one of `choices`; None (not applied) otherwise."""
    return lambda value: value if value in choices else None


def _flag(value: Any) -> str:
    return "true" if value else "false"


@dataclass(frozen=True)
class SettingWidget:
    key: str  # the session-state key and the URL query parameter
    field: str  # the Settings field it sets
    label: str
    help: str | None = None
    parse: Callable[[Any], Any] | None = None  # the widget's value -> the field's (None: not applied); None: the corpus
    to_param: Callable[[Any], str] = str  # the field's value -> the URL's text, as the widget writes it
    only_when: tuple[str, Any] | None = None  # (field, value): the widget is shown, and links carry it, only then
    ranking: bool = False  # drawn in the sidebar's expander of fusion weights, depth and support

    def shown(self, value_of: Callable[[str], Any]) -> bool:
        """Whether the widget is on screen, given each field's current value."""
        return self.only_when is None or value_of(self.only_when[0]) == self.only_when[1]


SHARED_WIDGETS = (
    SettingWidget(
        keys.CORPUS,
        "corpus_dir",
        "Corpus",
        "The knowledge base to search. Each corpus has its own Weaviate collection. To search another folder of "
        "markdown files, use *Add a folder* on the Corpus page (off when the app is read-only), or set LOOKUP_CORPUS_DIR.",
    ),
    SettingWidget(
        keys.MODEL,
        "embedding_model",
        "Embedding model",
        "The model that embeds queries and entries. Each model has its own collection of each corpus.",
        parse=_one_of(MODELS),
    ),
    SettingWidget(keys.TOP_K, "top_k", "Top-k", "How many results L1 returns and the final list keeps.", parse=int),
    SettingWidget(
        keys.L1_ON,
        "l1_enabled",
        "L1 semantic search",
        "Off: lookups answer from the L0 keyword hints only.",
        parse=bool,
        to_param=_flag,
    ),
    SettingWidget(keys.MODE, "search_mode", "L1 search mode", parse=_one_of(values(LookupMode))),
    SettingWidget(
        keys.ALPHA,
        "hybrid_alpha",
        "Hybrid alpha",
        "1 = vector only, 0 = keyword (BM25) only.",
        parse=float,
        only_when=("search_mode", "hybrid"),
    ),
)
WEIGHT_HELP = "How much the {} counts in the fused score (0: not at all)."


def _weight(key: str, field: str, label: str, what: str, **more: Any) -> SettingWidget:
    return SettingWidget(key, field, label, WEIGHT_HELP.format(what), parse=float, to_param=_number, ranking=True, **more)


def _number(value: Any) -> str:
    """A number as the URL carries it: 3 for 3.0, 0.25 as is."""
    return f"{float(value):g}"


RANKING_WIDGETS = (
    _weight(keys.VECTOR_WEIGHT, "vector_weight", "Vector weight", "vector (or hybrid) list"),
    _weight(keys.LEXICAL_WEIGHT, "lexical_weight", "BM25F weight", "BM25F list", only_when=("search_mode", "fusion")),
    _weight(keys.L0_WEIGHT, "l0_weight", "L0 weight", "L0 keyword list"),
    _weight(keys.NAME_WEIGHT, "name_weight", "Name weight", "bonus of an entry the query names in full"),
    SettingWidget(
        keys.CANDIDATE_DEPTH,
        "candidate_depth",
        "Candidate depth",
        "How many candidates each L1 query returns for the fusion (at least top-k).",
        parse=int,
        ranking=True,
    ),
    SettingWidget(
        keys.MISSING_SCORE,
        "missing_score",
        "Missing score",
        "What an entry counts for an L1 list that did not return it.",
        parse=_one_of(values(MissingScore)),
        ranking=True,
    ),
    SettingWidget(
        keys.SUPPORT,
        "support_threshold",
        "Support threshold",
        "The support estimate at or above which a result claims semantic support. Empty: the model's fitted cut.",
        parse=float,
        to_param=_number,
        ranking=True,
    ),
)
WIDGETS: tuple[SettingWidget, ...] = (*SHARED_WIDGETS, *RANKING_WIDGETS)
BY_FIELD = {w.field: w for w in WIDGETS}


def settings_changes(values: Mapping[Any, Any]) -> dict[str, Any]:
    """The Settings changes that the widgets' values (by key: st.session_state) ask for; the corpus, picked by
    label, aside."""
    out: dict[str, Any] = {}
    for w in WIDGETS:
        value = values.get(w.key)
        if w.parse is None or value is None:
            continue
        parsed = w.parse(value)
        if parsed is not None:
            out[w.field] = parsed
    return out


def url_params(settings: Settings, base: Settings, *, corpus_label: str | None) -> dict[str, str]:
    """The widgets' settings that differ in `settings` from `base` (the defaults), as query parameters, as the
    widgets would write them. The corpus goes as `corpus_label`, the label the sidebar shows for it."""
    out: dict[str, str] = {}
    for w in WIDGETS:
        value = getattr(settings, w.field)
        if value is None or value == getattr(base, w.field) or not w.shown(lambda field: getattr(settings, field)):
            continue
        if w.parse is not None:
            out[w.key] = w.to_param(value)
        elif corpus_label:
            out[w.key] = str(corpus_label)
    return out
