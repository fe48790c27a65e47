"""Probe queries cut from a knowledge base's own entries, for the label-free support calibration: an entry's title,
first sentence, a paragraph, or its keywords and entities. Headings and code stay out of sentence and paragraph probes,
so a probe names its entry only in the title style.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retrieval.core.corpus import Entry

STYLES = ("title", "sentence", "paragraph", "keywords")
PARAGRAPH_WORDS = 60  # a paragraph probe's length at most, in words: a long alert description's
MAX_ENTRIES = 120  # entries probed at most; a larger knowledge base is sampled (40 already give the same fit)

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[`*_]{1,3}")


@dataclass(frozen=True)
class Probe:
    """One probe query: the entry it was cut from, its style, and its text."""

    entry_id: str
    style: str
    text: str


def _paragraphs(text: str) -> list[str]:
    """The prose of a markdown body, paragraph by paragraph: no code, headings, tables or quotes; list items and
    links as plain words."""
    out: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        stripped = line.strip()
        if fenced or _HEADING.match(line) or not stripped or stripped.startswith(("|", ">", "$", "<")):
            if current:
                out.append(" ".join(current))
                current = []
            continue
        plain = _MARKUP.sub("", _LINK.sub(r"\1", _LIST_MARK.sub("", stripped)))
        if plain:
            current.append(plain)
    if current:
        out.append(" ".join(current))
    return [" ".join(p.split()) for p in out if len(p.split()) >= 4]


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.lstrip("#").strip() if _HEADING.match(line) else ""
    return ""


def probes_of(entry: Entry, *, keep_title: bool = False) -> list[Probe]:
    """The probes of one entry, one per style it has text for. `keep_title`: a sentence or paragraph probe starts
    with the body's title line, as the body writes it (to measure how much easier that makes them)."""
    found = [Probe(entry.entry_id, "title", entry.title)]
    paragraphs = _paragraphs(entry.text)
    prefix = _first_heading(entry.text) if keep_title else ""
    if paragraphs:
        sentence = " ".join(_SENTENCE_END.split(paragraphs[0])[0].split()[:PARAGRAPH_WORDS])
        found.append(Probe(entry.entry_id, "sentence", f"{prefix} {sentence}".strip()))
        words: list[str] = []
        for paragraph in paragraphs:
            words.extend(paragraph.split())
            if len(words) >= PARAGRAPH_WORDS:
                break
        if len(words) > len(sentence.split()) + 5:
            found.append(Probe(entry.entry_id, "paragraph", f"{prefix} {' '.join(words[:PARAGRAPH_WORDS])}".strip()))
    terms = list(dict.fromkeys([*entry.keywords, *entry.entities]))
    if len(terms) >= 2:
        found.append(Probe(entry.entry_id, "keywords", " ".join(terms)))
    return found


def draw_probes(
    entries: Iterable[Entry], *, max_entries: int = MAX_ENTRIES, seed: int = 0, keep_title: bool = False
) -> list[Probe]:
    """The probes of every entry, or of `max_entries` drawn at random (by `seed`, the same each time) from a larger
    knowledge base."""
    chosen: Sequence[Entry] = sorted(entries, key=lambda e: e.entry_id)
    if len(chosen) > max_entries:
        chosen = sorted(random.Random(seed).sample(list(chosen), max_entries), key=lambda e: e.entry_id)
    return [p for e in chosen for p in probes_of(e, keep_title=keep_title)]
