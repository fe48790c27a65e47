"""The metrics' display names."""

from __future__ import annotations

import pytest

from retrieval.evals.metric_names import labelled, metric_label


@pytest.mark.parametrize(
    "key, label",
    [
        ("mrr@10", "MRR@10"),
        ("mrr_at_10", "MRR@10"),
        ("hit@1", "Hit@1"),
        ("ndcg@10", "nDCG@10"),
        ("correct_supported_rate", "right and supported"),
        ("vector_weight", "vector_weight"),  # not a metric: as it is
    ],
)
def test_a_metric_reads_by_its_display_name(key, label):
    assert metric_label(key) == label


def test_only_metric_columns_are_renamed():
    assert labelled(["vector_weight", "mrr@10", "recall@5"]) == {"mrr@10": "MRR@10", "recall@5": "Recall@5"}
