"""What is embedded for an entry: a heading card (its title and file name as words), then its markdown sections with
their heading in front, each windowed within the model's token limit (it truncates past max_seq_length tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenizers import Tokenizer

from retrieval.core.corpus import Entry
from retrieval.core.text import split_camel

OVERLAP_TOKENS = 32
# Part of every stored content hash: a change of what is stored per entry (chunks, fields) re-embeds it.
INDEX_VERSION = "2"
_SECTION = re.compile(r"(?m)^(?=#{1,6}\s)")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Chunk:
    entry_id: str
    index: int
    count: int
    text: str  # what is embedded

    @property
    def card(self) -> bool:
        """The heading card: the chunk that stands for the whole entry in lexical search."""
        return self.index == 0


def stored_hash(entry: Entry) -> str:
    """The content hash the index keeps for an entry: its content and the index version."""
    return f"{entry.content_hash}.v{INDEX_VERSION}"


def heading_words(entry: Entry) -> str:
    """The title and the file name as words, each word once: 'CDINotReady' -> 'CDI Not Ready'."""
    seen: dict[str, str] = {}
    for source in (entry.title, entry.name):
        for word in _WORD.findall(source):
            for part in split_camel(word):
                seen.setdefault(part.lower(), part)
    return " ".join(seen.values())


def heading(entry: Entry) -> str:
    """What stands in front of every section: the title, and its words when they differ from it."""
    words = heading_words(entry)
    title = entry.title.strip()
    return title if words.lower() == title.lower() else f"{title} ({words})"


def sections(text: str) -> list[str]:
    """The body split in front of every markdown heading; blank parts dropped."""
    return [part.strip() for part in _SECTION.split(text) if part.strip()]


def chunk_entry(entry: Entry, tokenizer: Tokenizer, max_tokens: int, overlap: int = OVERLAP_TOKENS) -> list[Chunk]:
    """The card, then each section (windowed when long) with the heading in front. `tokenizer` is the
    model's, without truncation."""
    head = heading(entry)
    budget = max_tokens - 4 - len(tokenizer.encode(head + "\n", add_special_tokens=False).ids)
    if budget < 16:
        raise ValueError(f"title of {entry.entry_id} leaves under 16 tokens for the body")
    texts = [heading_words(entry) or head]
    for section in sections(entry.text):
        offsets = tokenizer.encode(section, add_special_tokens=False).offsets
        if len(offsets) <= budget:
            texts.append(f"{head}\n{section}")
            continue
        step = max(budget - overlap, 1)
        for start in range(0, len(offsets), step):
            window = offsets[start : start + budget]
            texts.append(f"{head}\n{section[window[0][0] : window[-1][1]]}")
            if start + budget >= len(offsets):
                break
    return [Chunk(entry.entry_id, i, len(texts), text) for i, text in enumerate(texts)]
