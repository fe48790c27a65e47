"""Property-based tests (hypothesis) of what bad input can reach: the L0 matcher, the frontmatter loader,
queries and eval sets. The per-case tables live beside their modules (tests/core/test_corpus.py,
tests/evals/test_sets.py, tests/core/test_hints.py); here hypothesis looks for what those tables miss.

Query length: a query over MAX_QUERY_CHARS (2,000) is refused, naming the limit, rather than answered.
The embedding model reads at most 256 word pieces (about 1,000-1,500 characters of English), so L1 would
silently ignore the rest of a 100 KB query while L0 matched keywords anywhere in it: the two layers would
answer different questions, and the record would hold 100 KB per row. 2,000 characters leave room for an
alert's summary and description; a clear refusal tells the user to trim what they pasted.
"""

from __future__ import annotations

import tempfile
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from retrieval.core.corpus import load_corpus
from retrieval.core.hints import FIELD_WEIGHT, KEEP_RATIO, L0Index
from retrieval.core.lookup import MAX_QUERY_CHARS, clean_query, lookup_knowledge, search_text
from retrieval.core.protocols import LookupServices
from retrieval.core.text import content_tokens
from retrieval.errors import EvalSetError, QueryError
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore

from .conftest import KUBEVIRT, RUNBOOKS, SAMPLE_CORPUS, SHARED, needs_shared

CORPUS = load_corpus(SAMPLE_CORPUS)
INDEX = L0Index(CORPUS.entries)
DOMAINS = set(CORPUS.domains)
TERMS = sorted({t for e in CORPUS.entries for t in (e.title, e.name, e.domain, *e.keywords, *e.entities)})

ANY_CHAR = st.characters(blacklist_categories=())  # every code point: controls, surrogates, unassigned
ANY_TEXT = st.text(ANY_CHAR, max_size=300)
# Text that matches: corpus terms mixed with any characters, so that scoring and domains are exercised too.
MIXED_TEXT = st.lists(
    st.sampled_from(TERMS) | ANY_TEXT | st.sampled_from(["\x00", "\u200b", "\u202e", "ﷺ", "İ", "\n\t"]), max_size=12
).map("".join)


# --- the L0 matcher ------------------------------------------------------------------------------------
def check_hints(text: str) -> None:
    hints = INDEX.match(text)
    again = INDEX.match(text)
    assert hints.to_dict() == again.to_dict(), "the same query gave other hints"
    matches = list(hints.matches)
    assert matches == sorted(matches, key=lambda m: (-m.score, m.entry_id))
    assert set(hints.domains) <= DOMAINS
    assert {m.domain for m in matches} <= set(hints.domains)
    assert hints.has_match == bool(matches)
    if matches:
        assert all(m.score > 0 and m.score >= KEEP_RATIO * matches[0].score for m in matches)
        assert all(m.entry_id in INDEX.entries and m.terms for m in matches)
        assert all(t.field in FIELD_WEIGHT for m in matches for t in m.terms)
        assert all(any(t.field != "domain" for t in m.terms) for m in matches)  # a domain word alone never matches
    else:
        assert hints.domains == () and hints.matched_titles == ()
    check_terms_are_the_query_s(text, hints)


def check_terms_are_the_query_s(text: str, hints) -> None:
    """Every term the hints show as written is the query's own words (never another entry's title, as was
    once shown), and normalises to the key it matched on."""
    written = unicodedata.normalize("NFKC", text)
    shown = [*hints.matched_keywords, *(t for m in hints.matches for t in m.terms)]
    for t in shown:
        assert t.term in written, (t, text)
        assert " ".join(content_tokens(t.term)) == t.key, (t, text)
    assert all(e in written for e in hints.entities), (hints.entities, text)


def _shared_queries() -> list[tuple[Path, str]]:
    return [(p, c.query) for p in sorted((SHARED / "eval_sets").glob("*.yaml")) for c in load_eval_set(p).cases]


def test_every_shown_term_is_in_the_query_on_all_shared_sets():
    """The property over every query of every shared eval set, on the corpus each set names."""
    needs_shared(SHARED / "eval_sets", RUNBOOKS, KUBEVIRT)
    indexes = {root: L0Index(load_corpus(root).entries) for root in (RUNBOOKS, KUBEVIRT)}
    cases = _shared_queries()
    assert len(cases) > 300
    shown = 0
    for path, query in cases:
        searched = search_text(query)
        hints = indexes[KUBEVIRT if path.name.startswith("kubevirt") else RUNBOOKS].match(searched)
        check_terms_are_the_query_s(searched, hints)
        shown += len(hints.matched_keywords)
    assert shown > 1000  # the sets do show terms: the property was checked on many


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT | MIXED_TEXT)
@example("")
@example("\x00\x01\x02\x1b[31m\x7f")
@example("\ud800\udfff lone surrogates PostgreSQL")
@example("ﷺ" * 50)  # NFKC expands each into 18 characters
@example("PodCrashLoopBackOff KubePodCrashLooping disk full vault sealed")
def test_l0_matcher_never_raises_and_is_ordered_and_deterministic(text):
    check_hints(text)


@settings(max_examples=8, deadline=None)
@given(MIXED_TEXT.filter(bool))
def test_l0_matcher_on_100_kb(seed):
    text = (seed * (100_000 // len(seed) + 1))[:100_000]
    check_hints(text)


def test_l0_matcher_is_the_same_built_twice():
    other = L0Index(reversed(CORPUS.entries))
    for text in TERMS[:200]:
        assert other.match(text).to_dict() == INDEX.match(text).to_dict(), text


# --- the frontmatter loader ------------------------------------------------------------------------------
JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(ANY_CHAR.filter(lambda c: c not in "\x00"), max_size=30)
    | st.dates()
    | st.datetimes(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)
FIELDS = st.dictionaries(
    st.sampled_from(["title", "domain", "category", "keywords", "tags", "aliases", "entities", "content", "handler", "severity"])
    | st.text(max_size=6),
    JSONISH,
    max_size=6,
)
HEADER = (
    FIELDS.map(lambda d: yaml.safe_dump(d, allow_unicode=True))
    | st.text(ANY_CHAR, max_size=200)
    | JSONISH.map(lambda v: yaml.safe_dump(v, allow_unicode=True))
)
BODY = st.text(ANY_CHAR, max_size=300)


@st.composite
def file_bytes(draw) -> bytes:
    kind = draw(st.sampled_from(["frontmatter", "frontmatter", "plain", "binary", "encoded"]))
    if kind == "binary":
        return draw(st.binary(max_size=600))
    if kind == "plain":
        return draw(BODY).encode("utf-8", "surrogatepass")
    if kind == "encoded":
        return draw(HEADER | BODY).encode(draw(st.sampled_from(["utf-16", "latin-1", "cp1252"])), "replace")
    fence = draw(st.sampled_from(["---", "---", "+++", ";;;", "--- ", "----"]))
    text = f"{fence}\n{draw(HEADER)}\n{fence}\n{draw(BODY)}"
    return draw(st.sampled_from(["", "\ufeff", "\n\n", " "])).encode() + text.encode("utf-8", "surrogatepass")


NAME = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"), min_size=1, max_size=24).filter(
    lambda n: not n.startswith(".") and len(n.encode()) < 200
)
FOLDER = st.sampled_from(["", "ops/", "db/", "DB/", "kubernetes/deep/"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.tuples(FOLDER, NAME), file_bytes(), min_size=1, max_size=8))
def test_load_corpus_never_raises_and_accounts_for_every_file(files):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written: set[str] = set()
        for (folder, name), content in files.items():
            path = root / f"{folder}{name}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            written.add(str(path))
        corpus = load_corpus(root)
        problem_paths = [p.path for p in corpus.problems]
        entry_paths = [str(root / f"{e.entry_id}.md") for e in corpus.entries]
        assert len(corpus.entries) + len(corpus.problems) == len(written)
        assert set(problem_paths) | set(entry_paths) == written and not set(problem_paths) & set(entry_paths)
        for problem in corpus.problems:
            assert problem.path in problem.reason, problem  # every problem names its file
        for entry in corpus.entries:
            assert entry.title and entry.domain.strip()
            assert all(isinstance(k, str) and k.strip() for k in entry.keywords + entry.entities)
            assert len(entry.content_hash) == 16


# --- queries ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["", "   ", "\x00\x01\x07", "\t\n\r\x0b\x0c", "\u200b\u2028\u2029", "\ud800"])
def test_empty_query_is_refused(query):
    with pytest.raises(QueryError, match="query is empty"):
        clean_query(query)


def test_100_kb_query_is_refused_naming_the_limit():
    with pytest.raises(QueryError) as info:
        clean_query(("disk full on the primary " * 4000).strip() + ".")  # 100,000 characters
    assert f"over the {MAX_QUERY_CHARS} character limit" in str(info.value) and "100000 characters" in str(info.value)
    assert clean_query("x" * MAX_QUERY_CHARS) == "x" * MAX_QUERY_CHARS  # the limit itself is allowed
    with pytest.raises(QueryError, match=str(MAX_QUERY_CHARS)):
        clean_query("x" * (MAX_QUERY_CHARS + 1))


def test_the_limit_is_above_what_the_model_reads(embedder):
    """The justification above, measured: the text at the limit is longer than what the model embeds."""
    text = " ".join(e.text for e in CORPUS.entries)[:MAX_QUERY_CHARS]
    assert embedder.count_tokens(text) > embedder.max_tokens


@pytest.fixture(scope="module")
def lookup_env(sample_store, embedder, base_settings, tmp_path_factory):
    recorder = InvocationStore(tmp_path_factory.mktemp("props") / "invocations.duckdb")
    services = LookupServices(INDEX, embedder, sample_store, recorder)
    yield services, base_settings.with_(collection="TestSample"), recorder
    recorder.close()


def test_control_characters_are_cleaned(lookup_env):
    services, settings, recorder = lookup_env
    result = lookup_knowledge("Vault\x00is\x07sealed\x1b[31m\u202e\r\n", services, settings.options())
    assert result.query.isprintable() and "Vault is sealed" in result.query
    assert result.results[0].entry_id == "security/VaultSealed" and result.layer == "L0+L1"
    recorder.flush()
    assert recorder.get(result.invocation_id)["input"] == result.query


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ANY_TEXT | MIXED_TEXT)
@example("🦄 ünïcödé ✓ 数据库复制延迟 تأخر النسخ  Ω≈ç√")
@example("\U0010ffff\U000e0001\ufffe\uffff")
def test_any_unicode_query_is_answered_and_recorded(lookup_env, text):
    services, settings, recorder = lookup_env
    try:
        cleaned = clean_query(text)
    except QueryError as exc:
        assert "query is empty" in str(exc) or "character limit" in str(exc)
        assume(False)
    result = lookup_knowledge(text, services, settings.options())
    assert result.query == cleaned and cleaned.isprintable()
    assert result.l1.status in ("ok", "empty") and result.l1.error is None
    assert result.layer in ("L0", "L1", "L0+L1", "none")
    recorder.flush()
    row = recorder.get(result.invocation_id)
    assert row["input"] == cleaned and row["layer"] == result.layer


# --- eval sets (tests/evals/test_sets.py has the first table; these are the cases it lacks) -----------------------
@pytest.mark.parametrize(
    "text, message",
    [
        ("", "expected a mapping with 'name' and 'cases', got NoneType"),
        ("cases: {a: 1}\n", "field 'cases' must be a non-empty list"),
        ("cases: []\n", "field 'cases' must be a non-empty list"),
        ("cases: [oops]\n", "case #1: expected a mapping, got str"),
        ("cases:\n- id: [a]\n  query: q\n  expected: []\n", "case #1: field 'id' must be text, got list"),
        ("cases:\n- id: {a: 1}\n  query: q\n  expected: []\n", "case #1: field 'id' must be text, got dict"),
        ("cases:\n- id: a\n  query: '   '\n  expected: []\n", "case 'a': field 'query' must be non-empty text"),
        ('cases:\n- id: a\n  query: "\\x00\\x07"\n  expected: []\n', "case 'a': field 'query': query is empty"),
        (f"cases:\n- id: a\n  query: {'x' * 2100}\n  expected: []\n", "case 'a': field 'query': query is 2100 characters"),
        ("cases:\n- id: a\n  query: q\n  expected: [1]\n", "must list entry ids as strings, found 1"),
        ("cases:\n- id: a\n  query: q\n  expected: [null]\n", "must list entry ids as strings, found None"),
        ("cases:\n- id: a\n  query: q\n  expected: {x/A: -1}\n", "grades must be whole numbers >= 0, found 'x/A': -1"),
        ("cases:\n- id: a\n  query: q\n  expected: {x/A: true}\n", "grades must be whole numbers >= 0, found 'x/A': True"),
        ("cases:\n- id: a\n  query: q\n  expected: {x/A: 1.5}\n", "grades must be whole numbers >= 0"),
        ("cases:\n- id: a\n  query: q\n  expected: {x/Nope: 2}\n", "entry ids the corpus does not have: x/Nope"),
        ("cases:\n- id: a\n  query: q\n  expected: [x/A, x/Gone, x/Lost]\n", "does not have: x/Gone, x/Lost"),
        ("name: [x]\ncases:\n- id: a\n  query: q\n  expected: []\n", "field 'name' must be text, got list"),
        ("corpus: [a]\ncases:\n- id: a\n  query: q\n  expected: []\n", "field 'corpus' must be a path, got list"),
        ('corpus: "a\\x00b"\ncases:\n- id: a\n  query: q\n  expected: []\n', "field 'corpus' is not a usable path"),
    ],
)
def test_more_bad_eval_sets_name_file_case_and_field(tmp_path, text, message):
    path = tmp_path / "set.yaml"
    path.write_text(text)
    with pytest.raises(EvalSetError) as info:
        load_eval_set(path, known_ids=["x/A"])
    assert message in str(info.value) and str(path) in str(info.value), str(info.value)


def test_eval_set_that_is_not_text_or_not_a_file(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00cases")
    with pytest.raises(EvalSetError, match="not valid YAML"):
        load_eval_set(binary)
    with pytest.raises(EvalSetError, match="cannot be read"):
        load_eval_set(tmp_path)


EVAL_CASE = st.dictionaries(st.sampled_from(["id", "query", "expected", "domain"]) | st.text(max_size=5), JSONISH, max_size=5)
EVAL_DOC = (
    st.dictionaries(
        st.sampled_from(["name", "description", "corpus", "cases"]) | st.text(max_size=5),
        JSONISH | st.lists(EVAL_CASE | JSONISH, max_size=4),
        max_size=5,
    )
    | JSONISH
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(EVAL_DOC)
def test_any_yaml_eval_set_loads_or_is_refused_by_name(tmp_path, doc):
    path = tmp_path / "random.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    try:
        loaded = load_eval_set(path, known_ids=["x/A", "x/B"])
    except EvalSetError as exc:
        assert str(path) in str(exc)
        return
    assert loaded.cases and all(c.id and clean_query(c.query) for c in loaded.cases)
    assert all(set(c.expected) <= {"x/A", "x/B"} for c in loaded.cases)
