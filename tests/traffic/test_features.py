"""The features' SQL on real DuckDB: one table of rows in, bins out."""

from __future__ import annotations

import duckdb
import pytest

from retrieval.core.hints_result import EntryMatch, L0Hints
from retrieval.traffic.features import (
    FEATURES,
    NO_ESTIMATE,
    UNFILTERED,
    bins_of,
    counts_of,
    feature_counts_sql,
    feature_sql,
    form_sql,
    names_entry_of,
    support_bin_sql,
    word_bin_sql,
    words_sql,
)


def _one(expr: str, **values) -> object:
    """`expr` over one row whose columns are `values` (DuckDB infers their types from the parameters)."""
    names = ", ".join(f"${k} AS {k}" for k in values)
    with duckdb.connect() as con:
        return con.execute(f"SELECT {expr} FROM (SELECT {names})", values).fetchone()[0]


@pytest.mark.parametrize(
    ("text", "words", "label"),
    [
        ("disk", 1, "1–5 words"),
        ("  disk   full on  node ", 4, "1–5 words"),
        ("one two three four five", 5, "1–5 words"),
        ("one two three four five six", 6, "6–10 words"),
        ("title line\nand its first sentence here", 7, "6–10 words"),
        (" ".join(["w"] * 11), 11, "11–20 words"),
        (" ".join(["w"] * 40), 40, "21–40 words"),
        (" ".join(["w"] * 41), 41, "41+ words"),
    ],
)
def test_words_and_their_bin(text, words, label):
    assert _one(words_sql("t"), t=text) == words
    assert _one(word_bin_sql("t"), t=text) == label


TRICKY = ("", " ", "\t", "\n\n", "a.\n", "  a  ", "a\u00a0b", "\r\n", "a \t b", "x\u000by", "é  日本\f\fz ", "a\t\t\n b  c\r")


def test_words_are_counted_as_a_regex_split_on_whitespace_runs_counts_them():
    """Spaces, tabs, line and form feeds and carriage returns split words; trim takes only spaces off the ends."""
    reference = "len(regexp_split_to_array(trim(t), '\\s+'))"
    with duckdb.connect() as con:
        rows = con.execute(f"SELECT t, {words_sql('t')}, {reference} FROM unnest(?) AS u(t)", [list(TRICKY)]).fetchall()
    assert [(text, ours) for text, ours, _ in rows] == [(text, ref) for text, _, ref in rows]
    assert {text: ours for text, ours, _ in rows}["a \t b"] == 2


@pytest.mark.parametrize(
    ("text", "names", "form"),
    [
        ("VirtAPIDown", True, "names an entry"),
        ("No running virt-api pods were detected.", True, "names an entry"),
        ("No running virt-api pods were detected.", False, "sentence"),
        ("How to debug KubeAPILatencyHigh?", False, "sentence"),
        ("virt-handler crashloops!", None, "sentence"),
        (" ".join(["w"] * 15), False, "sentence"),
        (" ".join(["w"] * 14), False, "title-like"),
        ("Kubevirt virt-handler Init:CrashLoopBackOff", False, "title-like"),
        ("Kubevirt virt-handler Init:CrashLoopBackOff", None, "title-like"),
    ],
)
def test_form(text, names, form):
    assert _one(form_sql("t", "n"), t=text, n=names) == form


@pytest.mark.parametrize(
    ("support", "label"),
    [
        (None, NO_ESTIMATE),
        (0.0, "0.0–0.1"),
        (0.0999, "0.0–0.1"),
        (0.1, "0.1–0.2"),
        (0.55, "0.5–0.6"),
        (0.95, "0.9–1.0"),
        (1.0, "0.9–1.0"),
    ],
)
def test_support_bin(support, label):
    expr = support_bin_sql("CAST(s AS DOUBLE)")
    assert _one(expr, s=support) == label
    assert label in bins_of("support")


def test_feature_counts_sql_counts_every_feature_over_a_table():
    columns = feature_sql(text="q", names_entry="n", domain="d", l0_matched="l0", fallback="fb", support="s")
    assert tuple(columns) == FEATURES
    with duckdb.connect() as con:
        con.execute("CREATE TABLE calls (q VARCHAR, n BOOLEAN, d VARCHAR, l0 BOOLEAN, fb BOOLEAN, s DOUBLE)")
        con.execute(
            "INSERT INTO calls VALUES ('disk full', false, 'storage', true, false, 0.93), "
            "('Pods restart after the deploy.', NULL, NULL, true, true, NULL), ('NodeDown', true, 'node', true, false, 0.41)"
        )
        counts = counts_of(con.execute(feature_counts_sql("calls", columns)).fetchall())
    assert counts["query_words"] == {"1–5 words": 3}
    assert counts["query_form"] == {"title-like": 1, "sentence": 1, "names an entry": 1}
    assert counts["routed_domain"] == {"storage": 1, UNFILTERED: 1, "node": 1}
    assert counts["filtered"] == {"yes": 2, "no": 1}
    assert counts["l0_match"] == {"yes": 3}
    assert counts["fallback"] == {"no": 2, "yes": 1}
    assert counts["support"] == {"0.9–1.0": 1, NO_ESTIMATE: 1, "0.4–0.5": 1}
    for feature in ("query_words", "query_form", "filtered", "l0_match", "fallback", "support"):
        assert set(counts[feature]) <= set(bins_of(feature)), feature
    assert bins_of("routed_domain") == ()


def _match(named: bool) -> EntryMatch:
    return EntryMatch("node/NodeDown", "NodeDown", "node", 1.0, (), named=named)


def test_names_entry_reads_whether_a_whole_title_was_named():
    hints = L0Hints("q", ("NodeDown",), (), ("node",), (), (_match(False), _match(True)))
    assert names_entry_of(hints)
    assert not names_entry_of(L0Hints("q", ("NodeDown",), (), ("node",), (), (_match(False),)))
    assert not names_entry_of(L0Hints("q", (), (), (), (), ()))
