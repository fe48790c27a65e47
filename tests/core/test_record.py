"""The tool_invocation record's ids (retrieval.core.record): UUIDv7, in the order the calls were made."""

from __future__ import annotations

import time
import uuid

from retrieval.core.record import new_invocation_id


def test_ids_are_uuid7_and_unique():
    ids = [new_invocation_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:50]:
        parsed = uuid.UUID(text)
        assert len(text) == 32 and parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert abs(int(text[:12], 16) - time.time() * 1000) < 60_000  # its first 48 bits: the creation millisecond


def test_ids_sort_in_the_order_of_the_calls():
    made = []
    for _ in range(5):
        made.append(new_invocation_id())
        time.sleep(0.003)
    assert made == sorted(made)
