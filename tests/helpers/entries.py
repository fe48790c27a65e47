"""Knowledge-base entries made by hand for store and ingest tests."""

from __future__ import annotations

from retrieval.core.corpus import Entry


def make_entry(entry_id, domain, text="Short body.", title=None, keywords=()):
    return Entry(entry_id, title or entry_id.split("/")[-1], domain, text, tuple(keywords), ())
