"""Which embedding model's vectors a collection holds: its description names the model, so that a collection is
never searched, or topped up, with another model's vectors (a hand-set LOOKUP_COLLECTION kept across a model switch)."""

from __future__ import annotations

MODEL_NOTE = "embedding model: "


def description_for(model: str) -> str:
    return f"Lookup Lab knowledge chunks; {MODEL_NOTE}{model}"


def model_in(description: str | None) -> str | None:
    """The embedding model a collection description names (None: a collection made before it was recorded)."""
    if not description or MODEL_NOTE not in description:
        return None
    return description.split(MODEL_NOTE, 1)[1].strip() or None


def other_model_message(collection: str, stored: str, wanted: str) -> str:
    return (
        f"collection '{collection}' holds vectors of the embedding model {stored}, but the settings name {wanted}: "
        "vectors of two models cannot be compared. Unset LOOKUP_COLLECTION (each model then gets its own "
        f"collection), or name a collection for {wanted} and ingest into it"
    )
