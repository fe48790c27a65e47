"""Traffic beside the eval sets, feature by feature: both distributions, their Jensen–Shannon divergence, the bin that
differs most, a sentence naming the largest difference, and the query style the eval sets lack."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.errors import TrafficError
from retrieval.traffic.features import FEATURES, FORMS, NO, NO_ESTIMATE, UNFILTERED, YES, FeatureCounts, bins_of

DIVERGENCE = "Jensen–Shannon divergence (base 2): 0 when the two mixes are the same, 1 when they share no bin"
FEATURE_LABELS = {
    "query_words": "query length (words)",
    "query_form": "query form",
    "routed_domain": "routed domain",
    "filtered": "filter rate",
    "l0_match": "L0 match rate",
    "fallback": "fallback rate",
    "support": "support estimate",
}
STYLE_FEATURES = ("query_form", "query_words")  # what "style" of query a set holds


@dataclass(frozen=True)
class FeatureMix:
    """One feature on both sides: its bins, each side's shares (summing to 1), the divergence, and the bin the traffic
    holds most beyond the eval sets (`widest`), which its sentence names."""

    feature: str
    bins: tuple[str, ...]
    traffic: tuple[float, ...]
    evals: tuple[float, ...]
    traffic_n: int
    evals_n: int
    divergence: float
    widest: str
    sentence: str

    def share(self, side: str, label: str) -> float:
        return (self.traffic if side == "traffic" else self.evals)[self.bins.index(label)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "label": FEATURE_LABELS.get(self.feature, self.feature),
            "bins": [
                {"bin": b, "traffic": round(t, 4), "evals": round(e, 4)}
                for b, t, e in zip(self.bins, self.traffic, self.evals, strict=True)
            ],
            "traffic_n": self.traffic_n,
            "evals_n": self.evals_n,
            "divergence": round(self.divergence, 4),
            "widest": self.widest,
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class StyleGap:
    """The query style (a form or length bin) the traffic has most beyond the eval sets."""

    feature: str
    bin: str
    traffic: float
    evals: float
    sentence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "bin": self.bin,
            "traffic": round(self.traffic, 4),
            "evals": round(self.evals, 4),
            "sentence": self.sentence,
        }


@dataclass(frozen=True)
class MixReport:
    set_names: tuple[str, ...]
    features: tuple[FeatureMix, ...]
    largest: str  # the feature of the largest divergence
    sentence: str
    lacking: StyleGap | None  # None: the eval sets hold every style as often as the traffic does

    def feature(self, name: str) -> FeatureMix:
        return next(f for f in self.features if f.feature == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "eval_sets": list(self.set_names),
            "divergence": DIVERGENCE,
            "largest": self.largest,
            "sentence": self.sentence,
            "lacking": None if self.lacking is None else self.lacking.to_dict(),
            "features": [f.to_dict() for f in self.features],
        }


def mix_report(traffic: FeatureCounts, evals: FeatureCounts, *, set_names: Sequence[str]) -> MixReport:
    """Both sides feature by feature (FEATURES). Raises TrafficError when a side has no call or case."""
    _check_side(traffic, "the traffic has no calls in this window", "calls")
    _check_side(evals, f"the chosen eval sets ({', '.join(set_names) or 'none'}) have no cases", "cases")
    names = tuple(set_names)
    mixes = tuple(feature_mix(f, traffic[f], evals[f], names) for f in FEATURES)
    top = max(mixes, key=lambda m: m.divergence)
    return MixReport(names, mixes, top.feature, top.sentence, style_lacking(mixes, names))


def _check_side(counts: FeatureCounts, message: str, what: str) -> None:
    for feature in FEATURES:
        if sum(counts.get(feature, {}).values()) <= 0:
            raise TrafficError(f"{message}: no {what} counted for feature {feature!r}")


def feature_mix(feature: str, traffic: Mapping[str, int], evals: Mapping[str, int], set_names: Sequence[str]) -> FeatureMix:
    """One feature's two distributions over the union of their bins (fixed bins first, in order)."""
    seen = sorted(set(traffic) | set(evals), key=lambda b: (-traffic.get(b, 0), b))
    bins = tuple(b for b in bins_of(feature) if b in seen) + tuple(b for b in seen if b not in bins_of(feature))
    t_n, e_n = sum(traffic.values()), sum(evals.values())
    t = tuple(traffic.get(b, 0) / t_n for b in bins)
    e = tuple(evals.get(b, 0) / e_n for b in bins)
    widest = max(range(len(bins)), key=lambda i: (round(t[i] - e[i], 9), t[i]))  # what the traffic holds most beyond
    sentence = share_sentence(feature, bins[widest], t[widest], e[widest], set_names)
    return FeatureMix(feature, bins, t, e, t_n, e_n, js_divergence(t, e), bins[widest], sentence)


def js_divergence(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen–Shannon divergence of two distributions over the same bins, base 2: in [0, 1]."""

    def kl(a: Sequence[float], m: Sequence[float]) -> float:
        return sum(x * math.log2(x / y) for x, y in zip(a, m, strict=True) if x > 0)

    mid = [(x + y) / 2 for x, y in zip(p, q, strict=True)]
    return min(1.0, max(0.0, (kl(p, mid) + kl(q, mid)) / 2))


def style_lacking(mixes: Sequence[FeatureMix], set_names: Sequence[str]) -> StyleGap | None:
    """The form or length bin the traffic has most beyond the eval sets (largest share gap), None when none."""
    gaps = [(m.share("traffic", b) - m.share("evals", b), m, b) for m in mixes if m.feature in STYLE_FEATURES for b in m.bins]
    gap, mix, label = max(gaps, key=lambda g: g[0], default=(0.0, None, ""))
    if mix is None or gap <= 0:
        return None
    t, e = mix.share("traffic", label), mix.share("evals", label)
    sentence = (
        f"The style {_sets(set_names)} {'lacks' if len(set_names) == 1 else 'lack'} most: {_phrase(mix.feature, label)[1]} "
        f"({pct(t)} of calls, {pct(e)} of the cases)."
    )
    return StyleGap(mix.feature, label, t, e, sentence)


def share_sentence(feature: str, label: str, traffic: float, evals: float, set_names: Sequence[str]) -> str:
    """'41% of calls are 1–5-word queries; the chosen eval set has 3% such cases.'"""
    predicate, _ = _phrase(feature, label)
    have = "has" if len(set_names) == 1 else "have"
    return f"{pct(traffic)} of calls {predicate}; {_sets(set_names)} {have} {pct(evals)} such cases."


def pct(share: float) -> str:
    return f"{share * 100:.0f}%" if share >= 0.01 or share == 0 else "<1%"


def _sets(set_names: Sequence[str]) -> str:
    if len(set_names) == 1:
        return f"the chosen eval set ({set_names[0]})"
    return "the chosen eval sets"


def _phrase(feature: str, label: str) -> tuple[str, str]:
    """What a call in this bin is (a predicate after 'N% of calls'), and the bin as a noun phrase."""
    if feature == "query_words":
        noun = f"{label.removesuffix(' words')}-word queries" if "+" not in label else f"queries of {label}"
        return f"are {noun}", noun
    if feature == "query_form":
        noun = {FORMS[0]: "queries that name an entry or alert", FORMS[1]: "sentence-like queries"}.get(label, f"{label} queries")
        return f"are {noun}", noun
    if feature == "routed_domain":
        return (
            ("search unfiltered", "unfiltered calls")
            if label == UNFILTERED
            else (f"are routed to domain {label}", f"calls routed to domain {label}")
        )
    if feature == "support":
        if label == NO_ESTIMATE:
            return "get no support estimate", "calls without a support estimate"
        return f"get a support estimate of {label}", f"a support estimate of {label}"
    yes_no = {
        "filtered": ("are filtered on a domain", "search without a domain filter"),
        "l0_match": ("are matched by L0", "are not matched by L0"),
        "fallback": ("fall back to L0 alone", "do not fall back"),
    }[feature]
    predicate = yes_no[0] if label == YES else yes_no[1] if label == NO else f"have {feature} {label}"
    return predicate, f"calls that {predicate}"
