"""A knowledge collection's support fit (its SupportNorms, retrieval.core.support_norms), kept beside it in Weaviate.
Fitted without labels after an ingest that changed the collection, or on `calibrate --self`; its key (content, model,
quality settings) tells a current fit from a stale one without probing again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weaviate.classes.config import DataType, Property
from weaviate.util import generate_uuid5

from retrieval.config import EVAL_SETTINGS, Settings
from retrieval.core.chunking import stored_hash
from retrieval.core.corpus import Corpus
from retrieval.core.protocols import LookupServices
from retrieval.core.self_calibration import SelfCalibration, self_calibrate
from retrieval.core.support_norms import SupportNorms
from retrieval.errors import ConfigError
from retrieval.store.collection_names import SUPPORT_SUFFIX

if TYPE_CHECKING:
    from retrieval.store.weaviate_store import KnowledgeStore

FIT_VERSION = "1"  # part of every key: a change of the probes or the baselines refits every knowledge base
NOT_KEYED = ("support_threshold", "top_k")  # settings that change the claim or the list shown, not the features


@dataclass(frozen=True)
class StoredFit:
    """A fit as the collection keeps it: the baselines and the key of what they were fitted on."""

    norms: SupportNorms
    key: str
    figures: dict[str, Any]


def fit_name(store: KnowledgeStore) -> str:
    return store.name + SUPPORT_SUFFIX


def fit_key(corpus: Corpus, settings: Settings) -> str:
    """What a fit depends on: every entry's content hash, the embedding model and the quality settings."""
    payload = {
        "version": FIT_VERSION,
        "entries": sorted((e.entry_id, stored_hash(e)) for e in corpus.entries),
        "settings": {name: str(getattr(settings, name)) for name in EVAL_SETTINGS if name not in NOT_KEYED},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def read_fit(store: KnowledgeStore) -> StoredFit | None:
    """The collection's stored fit, or None when it has none. Raises ConfigError for one that cannot be read."""
    name = fit_name(store)
    if not store.client.collections.exists(name):
        return None
    objects = list(store.client.collections.use(name).iterator(return_properties=["key", "data"]))
    if not objects:
        return None
    props = objects[0].properties
    try:
        data = json.loads(str(props["data"]))
    except ValueError as exc:
        raise ConfigError(f"support fit of collection {store.name!r} ({name}): not JSON: {exc}") from exc
    norms = SupportNorms.from_dict(data.get("norms"), source=f"support fit of collection {store.name!r} ({name})")
    return StoredFit(norms, str(props["key"]), data.get("figures") or {})


def write_fit(store: KnowledgeStore, norms: SupportNorms, key: str, figures: dict[str, Any]) -> None:
    """Replace the collection's stored fit."""
    name = fit_name(store)
    if store.client.collections.exists(name):
        store.client.collections.delete(name)
    store.client.collections.create(
        name,
        properties=[
            Property(name="key", data_type=DataType.TEXT),
            Property(name="data", data_type=DataType.TEXT, index_filterable=False, index_searchable=False),
        ],
    )
    data = json.dumps({"norms": norms.to_dict(), "figures": figures})
    store.client.collections.use(name).data.insert(properties={"key": key, "data": data}, uuid=generate_uuid5(name))


def drop_fit(store: KnowledgeStore) -> None:
    if store.client.collections.exists(fit_name(store)):
        store.client.collections.delete(fit_name(store))


def ensure_fit(
    store: KnowledgeStore,
    corpus: Corpus,
    services: LookupServices,
    settings: Settings,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    force: bool = False,
) -> tuple[SupportNorms | None, SelfCalibration | None]:
    """The collection's current fit: the stored one when its key matches, else a new self-calibration, stored.
    Returns (the baselines, or None when the knowledge base gave too few probes; the calibration when one ran)."""
    key = fit_key(corpus, settings)
    stored = None if force else _readable(store)
    if stored is not None and stored.key == key:
        return stored.norms, None
    what = f"{settings.collection} ({len(corpus.entries)} entries), {settings.embedding_model}, {settings.search_mode}"
    result = self_calibrate(corpus.entries, services, settings.options(), progress=progress, fitted_on=what)
    if result.norms is None:
        drop_fit(store)
        return None, result
    write_fit(store, result.norms, key, result.to_dict())
    return result.norms, result


def _readable(store: KnowledgeStore) -> StoredFit | None:
    """The stored fit, or None when there is none or it cannot be read (it is then fitted again)."""
    try:
        return read_fit(store)
    except ConfigError:
        return None
