"""The metrics as people read them: MRR@10, not mrr@10 or mrr_at_10; the rates of support in words."""

from __future__ import annotations

import re

METRIC_LABELS = {
    "mrr@10": "MRR@10",
    "hit@1": "Hit@1",
    "hit_rate@1": "Hit@1",
    "recall@5": "Recall@5",
    "ndcg@10": "nDCG@10",
    "correct_supported_rate": "right and supported",
    "unanswerable_unsupported_rate": "unanswerable unsupported",
}


def metric_label(name: str) -> str:
    """The display name of a metric key ("mrr@10", "mrr_at_10"); a name it does not know, as it is."""
    key = re.sub(r"_at_(\d+)$", r"@\1", name)
    return METRIC_LABELS.get(key, name)


def labelled(columns: list[str]) -> dict[str, str]:
    """A rename map of the metric columns among `columns` to their display names."""
    return {c: metric_label(c) for c in columns if metric_label(c) != c}
