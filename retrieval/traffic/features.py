"""What a call (a recorded invocation, or an eval case looked up) is described by when traffic is set beside eval sets:
each feature's bins, and the SQL that puts a row in them, one definition for both sides."""

from __future__ import annotations

from collections.abc import Mapping

from retrieval.core.hints_result import L0Hints

# The typed columns of tool_invocation that traffic reads (written with every row, backfilled from the JSON):
SUPPORT = "support"  # the support estimate (relevance.confidence), NULL when none was made
SUPPORTED = "supported"  # the claim made (relevance.semantic_support)
SUPPORT_FIT = "support_fit"  # which fit the estimate read (relevance.fit, as short text)
L0_MATCHED = "l0_matched"  # L0 matched at least one entry
NAMES_ENTRY = "names_entry"  # L0 matched an entry's title (the query names an entry or alert)
TOP_DOMAIN = "top_domain"  # the domain of the top result
COLLECTION = "collection"  # the Weaviate collection (the corpus) the call searched, NULL in rows from before
TRAFFIC_COLUMNS = (SUPPORT, SUPPORTED, SUPPORT_FIT, L0_MATCHED, NAMES_ENTRY, TOP_DOMAIN, COLLECTION)

FEATURES = ("query_words", "query_form", "routed_domain", "filtered", "l0_match", "fallback", "support")
WORD_BINS = ((1, 5), (6, 10), (11, 20), (21, 40), (41, None))  # query length in words, inclusive
FORMS = ("names an entry", "sentence", "title-like")
SENTENCE_WORDS = 15  # a query this long, or ending in . ! ?, reads as a sentence
SUPPORT_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
NO_ESTIMATE = "no estimate"
UNFILTERED = "(unfiltered)"

FeatureCounts = Mapping[str, Mapping[str, int]]  # feature -> bin label -> count


def word_bin_label(low: int, high: int | None) -> str:
    return f"{low}+ words" if high is None else f"{low}–{high} words"


WHITESPACE = (9, 10, 12, 13)  # tab, line feed, form feed, carriage return: with the space, what \s matches in RE2


def words_sql(text: str) -> str:
    """The number of words of the text column `text` once trimmed of spaces: 1 + its runs of whitespace, as
    len(regexp_split_to_array(trim(text), '\\s+')) counts them, without a regex: runs = spaces - spaces after a space."""
    spaced = f"trim({text})"
    for code in WHITESPACE:
        spaced = f"replace({spaced}, chr({code}), ' ')"
    marked = f"replace({spaced}, ' ', ' ' || chr(9))"  # a tab after each space: a space after a space leaves tab-space
    spaces = f"length({spaced}) - length(replace({spaced}, ' ', ''))"
    return f"(1 + {spaces} - (length({marked}) - length(replace({marked}, chr(9) || ' ', ''))) // 2)"


def word_bin_sql(text: str) -> str:
    words = words_sql(text)
    arms = " ".join(f"WHEN {words} <= {high} THEN '{word_bin_label(low, high)}'" for low, high in WORD_BINS if high is not None)
    low, _ = WORD_BINS[-1]
    return f"CASE {arms} ELSE '{word_bin_label(low, None)}' END"


def form_sql(text: str, names_entry: str) -> str:
    """The query's form: it names an entry (L0 matched a title), reads as a sentence, or is title-like."""
    return (
        f"CASE WHEN coalesce({names_entry}, false) THEN '{FORMS[0]}' "
        f"WHEN regexp_matches(trim({text}), '[.!?]$') OR {words_sql(text)} >= {SENTENCE_WORDS} THEN '{FORMS[1]}' "
        f"ELSE '{FORMS[2]}' END"
    )


def support_bin_label(index: int) -> str:
    return f"{SUPPORT_EDGES[index]:.1f}–{SUPPORT_EDGES[index + 1]:.1f}"


def support_bin_sql(support: str) -> str:
    arms = " ".join(
        f"WHEN {support} < {SUPPORT_EDGES[i + 1]} THEN '{support_bin_label(i)}'" for i in range(len(SUPPORT_EDGES) - 2)
    )
    return f"CASE WHEN {support} IS NULL THEN '{NO_ESTIMATE}' {arms} ELSE '{support_bin_label(len(SUPPORT_EDGES) - 2)}' END"


YES, NO = "yes", "no"  # the bins of the yes/no features (filtered, l0_match, fallback)


def yes_no_sql(flag: str) -> str:
    return f"CASE WHEN coalesce({flag}, false) THEN '{YES}' ELSE '{NO}' END"


def feature_sql(*, text: str, names_entry: str, domain: str, l0_matched: str, fallback: str, support: str) -> dict[str, str]:
    """Each feature's SQL over a row's columns, in FEATURES order; `domain` is the L1 filter applied (NULL: none)."""
    return {
        "query_words": word_bin_sql(text),
        "query_form": form_sql(text, names_entry),
        "routed_domain": f"coalesce({domain}, '{UNFILTERED}')",
        "filtered": f"CASE WHEN {domain} IS NULL THEN '{NO}' ELSE '{YES}' END",
        "l0_match": yes_no_sql(l0_matched),
        "fallback": yes_no_sql(fallback),
        "support": support_bin_sql(support),
    }


def feature_counts_sql(source: str, columns: dict[str, str]) -> str:
    """One query counting the rows of `source` per feature and bin (rows: feature, bin, count); `columns` from feature_sql."""
    return " UNION ALL ".join(
        f"SELECT '{feature}' AS feature, {expr} AS bin, count(*) AS n FROM {source} GROUP BY 2"
        for feature, expr in columns.items()
    )


def counts_of(rows: list[tuple[str, str, int]]) -> dict[str, dict[str, int]]:
    """FeatureCounts from the rows of feature_counts_sql."""
    out: dict[str, dict[str, int]] = {feature: {} for feature in FEATURES}
    for feature, label, n in rows:
        out.setdefault(feature, {})[label] = int(n)
    return out


def bins_of(feature: str) -> tuple[str, ...]:
    """A feature's bins in display order; routed_domain has none fixed (its bins are the domains seen)."""
    fixed = {
        "query_words": tuple(word_bin_label(low, high) for low, high in WORD_BINS),
        "query_form": FORMS,
        "support": (*(support_bin_label(i) for i in range(len(SUPPORT_EDGES) - 1)), NO_ESTIMATE),
    }
    return fixed.get(feature, (YES, NO) if feature in ("filtered", "l0_match", "fallback") else ())


def names_entry_of(hints: L0Hints) -> bool:
    """Whether the query names an entry or alert: L0 matched an entry's whole title or file name (EntryMatch.named)."""
    return any(m.named for m in hints.matches)
