"""How far two rankings of the same query agree: overlap@k and rank-biased overlap (RBO, Webber, Moffat and Zobel 2010,
"A similarity measure for indefinite rankings", the extrapolated RBO_ext of their equation 32 for finite lists)."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.errors import LookupLabError

RBO_P = 0.9  # the persistence: the top 10 ranks carry 86% of the weight


def overlap_at_k(before: Sequence[str], after: Sequence[str], k: int | None = None) -> float:
    """The share of the first k of each list that both hold; k defaults to the longer list (two empty lists: 1)."""
    k = max(len(before), len(after)) if k is None else k
    if k <= 0:
        return 1.0
    return len(set(before[:k]) & set(after[:k])) / k


def rbo(before: Sequence[str], after: Sequence[str], p: float = RBO_P) -> float:
    """RBO_ext of two finite rankings (without repeated ids): 1 for the same list, 0 for lists sharing nothing; a shorter
    list's agreement is extrapolated past its end. Two empty lists: 1; one empty: 0."""
    if not 0 < p < 1:
        raise LookupLabError(f"p {p}: RBO needs 0 < p < 1")
    short, long_ = (before, after) if len(before) <= len(after) else (after, before)
    s, ll = len(short), len(long_)
    if ll == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_s: set[str] = set()
    seen_l: set[str] = set()
    overlap = 0  # X_d: the items the two lists share down to depth d (the short list whole once d > s)
    total = 0.0
    x_s = 0
    for d in range(1, ll + 1):
        item_l = long_[d - 1]
        if d <= s:
            item_s = short[d - 1]
            overlap += (item_s in seen_l) + (item_l in seen_s) + (item_s == item_l)
            seen_s.add(item_s)
        else:
            overlap += item_l in seen_s
        seen_l.add(item_l)
        if d == s:
            x_s = overlap
        total += overlap / d * p**d
        if d > s:
            total += x_s * (d - s) / (s * d) * p**d
    return (1 - p) / p * total + ((overlap - x_s) / ll + x_s / s) * p**ll
