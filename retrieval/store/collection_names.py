"""Collection names Weaviate would refuse or take for another's: it compares class names without case."""

from __future__ import annotations

import re

from weaviate import WeaviateClient

from retrieval.errors import ConfigError
from retrieval.store.partition import partition_name

VALID_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*")
SETTING = "LOOKUP_COLLECTION (or collection: in lookup.yaml)"
MANIFEST_SUFFIX = "_Manifest"  # the ingest's manifest (retrieval.store.manifest)
SUPPORT_SUFFIX = "_Support"  # the support fit (retrieval.store.support_fit)


def store_names(collection: str) -> list[str]:
    """The collection and its companions: the per-domain partition, the manifest and the support fit."""
    return [collection, partition_name(collection), collection + MANIFEST_SUFFIX, collection + SUPPORT_SUFFIX]


def clash(wanted: list[str], existing: list[str]) -> tuple[str, str] | None:
    """The first (wanted, existing) pair that differ only by case, or None."""
    by_case = {name.lower(): name for name in existing}
    for name in wanted:
        found = by_case.get(name.lower())
        if found is not None and found != name:
            return name, found
    return None


def refuse_clashes(client: WeaviateClient, collection: str) -> None:
    """Raise ConfigError, before anything is written, when `collection` is a name Weaviate refuses or it or one of its
    companions differs from an existing collection only by case."""
    if not VALID_NAME.fullmatch(collection):
        raise ConfigError(
            f"collection '{collection}' must start with a capital letter and hold only letters, digits and _: change {SETTING}"
        )
    found = clash(store_names(collection), list(client.collections.list_all(simple=True)))
    if found is not None:
        wanted, existing = found
        raise ConfigError(
            f"collection '{wanted}' differs from the existing collection '{existing}' only by case (Weaviate compares "
            f"names without case): change {SETTING} from '{collection}' to '{existing[: len(collection)]}' to use "
            "the existing one, or to a name of its own"
        )
