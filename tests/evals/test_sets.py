import hashlib
import json

import pytest

from retrieval.config import REPO_ROOT
from retrieval.core.corpus import load_corpus
from retrieval.errors import EvalSetError
from retrieval.evals.sets import load_eval_set

from ..conftest import RUNBOOKS, RUNBOOKS_EVAL, SAMPLE_CORPUS, needs_shared


def write(tmp_path, text):
    p = tmp_path / "set.yaml"
    p.write_text(text)
    return p


def test_shipped_eval_sets_are_valid_against_the_sample_corpus():
    ids = [e.entry_id for e in load_corpus(SAMPLE_CORPUS).entries]
    sets = sorted((REPO_ROOT / "eval_sets").glob("*.yaml"))
    assert len(sets) >= 2
    for path in sets:
        es = load_eval_set(path, known_ids=ids)
        assert es.corpus_dir == SAMPLE_CORPUS.resolve()
        assert es.cases


def test_runbooks_sets_load_with_their_corpus():
    needs_shared()
    ids = [e.entry_id for e in load_corpus(RUNBOOKS).entries]
    es = load_eval_set(RUNBOOKS_EVAL, known_ids=ids)
    assert len(es.cases) == _cases_in(RUNBOOKS_EVAL) and es.corpus_dir == RUNBOOKS.resolve()
    un = load_eval_set(RUNBOOKS_EVAL.with_name("runbooks-alert-summaries-unanswerable.yaml"), known_ids=ids)
    assert un.cases and not any(c.answerable for c in un.cases)


def test_graded_relevance(tmp_path):
    es = load_eval_set(write(tmp_path, "name: g\ncases:\n- id: a\n  query: q\n  expected: {x/A: 2, x/B: 1}\n"))
    assert es.cases[0].expected == {"x/A": 2, "x/B": 1}


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\n", "field 'cases' must be a non-empty list"),
        ("- just a list\n", "expected a mapping"),
        ("cases: [oops\n", "not valid YAML"),
        ("cases:\n- query: q\n  expected: []\n", "case #1: field 'id' is missing"),
        ("cases:\n- id: a\n  expected: []\n", "case 'a': field 'query' must be non-empty text"),
        ("cases:\n- id: a\n  query: 5\n  expected: []\n", "field 'query'"),
        ("cases:\n- id: a\n  query: q\n", "case 'a': field 'expected' is missing"),
        ("cases:\n- id: a\n  query: q\n  expected: x/A\n", "field 'expected' must be a list"),
        ("cases:\n- id: a\n  query: q\n  expected: {x/A: high}\n", "grades must be whole numbers"),
        ("cases:\n- id: a\n  query: q\n  expected: []\n  domain: [k]\n", "field 'domain' must be text"),
        ("cases:\n- id: a\n  query: q\n  expected: []\n- id: a\n  query: r\n  expected: []\n", "case 'a': duplicate case id"),
        ("cases:\n- id: a\n  query: q\n  expected: [x/Nope]\n", "entry ids the corpus does not have: x/Nope"),
        ("cases:\n- id: a\n  query: q\n  expected: [x/A]\n  not_relevant: x/B\n", "case 'a': field 'not_relevant' must list"),
        ("cases:\n- id: a\n  query: q\n  expected: [x/A]\n  not_relevant: [3]\n", "case 'a': field 'not_relevant' must list"),
        ("cases:\n- id: a\n  query: q\n  expected: [x/A]\n  not_relevant: [x/A]\n", "'expected' calls relevant: x/A"),
        (
            "cases:\n- id: a\n  query: q\n  expected: [x/A]\n  not_relevant: [x/Gone]\n",
            "case 'a': field 'not_relevant' names entry ids the corpus does not have: x/Gone",
        ),
        ("cases:\n- id: a\n  query: q\n  expected: []\n  invocation: [i]\n", "case 'a': field 'invocation' must be text"),
        ("judged: all\ncases:\n- id: a\n  query: q\n  expected: []\n", "field 'judged' must be 'complete'"),
    ],
)
def test_bad_eval_sets_name_file_case_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(EvalSetError) as info:
        load_eval_set(path, known_ids=["x/A"])
    assert message in str(info.value) and str(path) in str(info.value)


def test_judgments_beside_the_relevant_entries(tmp_path):
    text = (
        "name: j\njudged: complete\ncases:\n- id: a\n  query: q\n  expected: {x/A: 2, x/B: 0}\n"
        "  not_relevant: [x/C, x/C]\n  invocation: 1a2b\n- id: b\n  query: r\n  expected: []\n"
    )
    es = load_eval_set(write(tmp_path, text), known_ids=["x/A", "x/B", "x/C"])
    assert es.judged == "complete" and es.complete
    a, b = es.cases
    assert (a.expected, a.not_relevant, a.invocation) == ({"x/A": 2, "x/B": 0}, ("x/C",), "1a2b")
    assert (b.not_relevant, b.invocation) == ((), None)
    assert a.to_dict()["not_relevant"] == ["x/C"] and "not_relevant" not in b.to_dict()


def test_the_shipped_sets_keep_their_content_hash_and_judge_only_what_they_list():
    """A set without the new fields hashes as before (its saved runs stay comparable) and is not complete."""
    from retrieval.lab.run_provenance import set_hash

    for path in sorted((REPO_ROOT / "eval_sets").glob("*.yaml")):
        es = load_eval_set(path)
        assert es.judged == "listed" and not es.complete
        assert all(set(c.to_dict()) == {"id", "query", "expected", "domain"} for c in es.cases)
        fields = [{"id": c.id, "query": c.query, "expected": c.expected, "domain": c.domain} for c in es.cases]
        canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")
        assert set_hash(es) == hashlib.sha256(canonical).hexdigest()[:16]  # the hash of the four fields, as before


def test_missing_file(tmp_path):
    with pytest.raises(EvalSetError, match="not found"):
        load_eval_set(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "expected, known, fit",
    [
        (["x/A", "x/B"], ["x/A", "x/B", "y/C"], (2, ())),  # every expected entry is there: fits
        (["x/A", "x/B"], ["x/A"], (2, ("x/B",))),  # one of two missing
        (["x/A", "x/A"], [], (1, ("x/A",))),  # counted once
        ([], ["x/A"], (0, ())),  # nothing expected: nothing can be missing
    ],
)
def test_corpus_fit_is_decided_by_expected_ids(tmp_path, expected, known, fit):
    from retrieval.evals.sets import corpus_fit

    cases = (
        "".join(f"- id: c{i}\n  query: q\n  expected: [{e}]\n" for i, e in enumerate(expected))
        or "- id: c\n  query: q\n  expected: []\n"
    )
    es = load_eval_set(write(tmp_path, f"name: f\ncorpus: /nowhere/else\ncases:\n{cases}"))
    got = corpus_fit(es, known)
    assert (got.expected, got.missing) == fit
    assert got.fits is (not fit[1])


def _cases_in(path):
    """The number of cases the file holds, read from the file itself (the shared sets change between turns)."""
    import yaml

    return len(yaml.safe_load(path.read_text(encoding="utf-8"))["cases"])
