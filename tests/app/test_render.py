"""The app's rendering helpers: exactly what matched is highlighted, and every piece of text is escaped."""

from __future__ import annotations

import pytest

from app_support.render import code, highlight_html, spans
from retrieval.core.text import tokens


def keys(text: str) -> set[str]:
    return set(tokens(text))  # L0's match keys are normalised tokens


@pytest.mark.parametrize(
    "text, query, marked",
    [
        ("PrometheusRemoteWriteDesiredShards", "prometheus remote write", ["PrometheusRemoteWrite"]),
        ("KubePodCrashLooping", "pod crash looping", ["PodCrashLooping"]),
        ("etcdMembersDown", "etcd members", ["etcdMembers"]),
        ("Pod is crash looping", "pod crash looping", ["Pod", "crash", "looping"]),
        ("The pods of the node", "the pod", ["pods"]),  # a stop word is never marked
        ("Nothing here", "vault", []),
    ],
)
def test_only_what_matched_is_marked(text, query, marked):
    pieces = spans(text, keys(query))
    assert [p for p, hit in pieces if hit] == marked
    assert "".join(p for p, _ in pieces) == text  # nothing lost or added


def test_the_marks_are_escaped_html():
    from app_support.render import MARK_STYLE

    out = highlight_html("<b>VaultSealed</b> & more", keys("vault"))
    assert out == f'<span>&lt;b&gt;<mark style="{MARK_STYLE}">Vault</mark>Sealed&lt;/b&gt; &amp; more</span>'


@pytest.mark.parametrize(
    "text, span",
    [
        ("payments/currency-rounding", "`payments/currency-rounding`"),  # no backslash: escapes are literal in code
        ("a`b", "``a`b``"),
        ("`x`", "`` `x` ``"),
    ],
)
def test_an_id_in_a_code_span_reads_as_written(text, span):
    assert code(text) == span
