"""Split long entries so that the model sees all of each one (it truncates past max_seq_length tokens)."""

from __future__ import annotations

from dataclasses import dataclass

from .corpus import Entry

OVERLAP_TOKENS = 32


@dataclass(frozen=True)
class Chunk:
    entry_id: str
    index: int
    count: int
    text: str  # what is embedded: the title, then a window of the body


def chunk_entry(entry: Entry, tokenizer, max_tokens: int, overlap: int = OVERLAP_TOKENS) -> list[Chunk]:
    """Windows of the body, each with the title in front, each within `max_tokens` model tokens."""
    head = entry.title.strip()
    budget = max_tokens - 4 - len(tokenizer(head + "\n", add_special_tokens=False)["input_ids"])
    body = entry.text
    if budget < 16:
        raise ValueError(f"title of {entry.entry_id} leaves under 16 tokens for the body")
    enc = tokenizer(body, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= budget:
        return [Chunk(entry.entry_id, 0, 1, f"{head}\n{body}".strip())]
    spans = []
    step = max(budget - overlap, 1)
    for start in range(0, len(offsets), step):
        window = offsets[start : start + budget]
        spans.append(body[window[0][0] : window[-1][1]])
        if start + budget >= len(offsets):
            break
    return [Chunk(entry.entry_id, i, len(spans), f"{head}\n{span}") for i, span in enumerate(spans)]
