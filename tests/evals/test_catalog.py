"""Where corpora and eval sets are found: temporary repo and shared folders, plus the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.config import collection_for
from retrieval.evals.catalog import (
    SAMPLE_CORPUS,
    CorpusChoice,
    EvalSetFile,
    added_corpora,
    eval_set_files,
    known_corpora,
    preferred_eval_set,
    remember_corpus,
    same_path,
)

from ..conftest import KUBEVIRT, RUNBOOKS, RUNBOOKS_EVAL, SHARED, needs_shared


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def eval_yaml(corpus: str | None, *, answerable: bool) -> str:
    head = f"corpus: {corpus}\n" if corpus else ""
    expected = "[a/B]" if answerable else "[]"
    return f"{head}cases:\n  - id: one\n    query: something broke\n    expected: {expected}\n"


# --- same_path ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a, b, same",
    [
        (None, None, False),
        (None, "x", False),
        ("x", None, False),
        (SAMPLE_CORPUS, SAMPLE_CORPUS, True),
        (SAMPLE_CORPUS, str(SAMPLE_CORPUS / ".." / "sample_corpus"), True),
        (SAMPLE_CORPUS, SAMPLE_CORPUS.parent, False),
    ],
)
def test_same_path(a, b, same):
    assert same_path(a, b) is same


# --- eval_set_files ----------------------------------------------------------------------------------
def test_eval_set_files_repo_first_then_shared_each_sorted(tmp_path):
    repo, shared = tmp_path / "repo", tmp_path / "shared"
    for name in ("b.yaml", "a.yaml", "c.yml", "notes.txt"):
        write(repo / "eval_sets" / name)
    write(repo / "eval_sets" / "sub" / "deep.yaml")  # not a direct child
    for name in ("z.yaml", "x.yaml"):
        write(shared / "eval_sets" / name)
    files = eval_set_files(repo_root=repo, shared_dir=shared)
    assert files == [
        EvalSetFile("eval_sets/a.yaml", repo / "eval_sets" / "a.yaml"),
        EvalSetFile("eval_sets/b.yaml", repo / "eval_sets" / "b.yaml"),
        EvalSetFile("shared/eval_sets/x.yaml", shared / "eval_sets" / "x.yaml"),
        EvalSetFile("shared/eval_sets/z.yaml", shared / "eval_sets" / "z.yaml"),
    ]


def test_eval_set_files_without_shared_or_anything(tmp_path):
    write(tmp_path / "repo" / "eval_sets" / "only.yaml")
    assert [f.label for f in eval_set_files(repo_root=tmp_path / "repo", shared_dir=tmp_path / "absent")] == [
        "eval_sets/only.yaml"
    ]
    assert eval_set_files(repo_root=tmp_path / "none", shared_dir=tmp_path / "absent") == []


def test_eval_set_files_of_this_repo():
    labels = [f.label for f in eval_set_files(shared_dir=SHARED)]
    assert labels[:3] == [
        "eval_sets/sample-ops-alerts.yaml",
        "eval_sets/sample-ops-issue-titles.yaml",
        "eval_sets/sample-ops-unanswerable.yaml",
    ]
    assert all(f.path.is_file() for f in eval_set_files(shared_dir=SHARED))


# --- preferred_eval_set ------------------------------------------------------------------------------
# Each file: (corpus it names, relative to the eval_sets folder; has an answerable case) or "broken".
@pytest.mark.parametrize(
    "files, index",
    [
        ([], 0),
        ([("../other", True), ("../target", False), ("../target", True)], 2),  # first for the corpus with an answer
        ([("../target", False), ("../other", True)], 0),  # only an unanswerable set fits: still the one for it
        ([("../other", True), ("../target", False)], 1),
        ([("../other", True), "broken", ("../target", True)], 2),  # an unreadable file is passed over
        ([("../other", True), ("../other", False)], 0),  # none fits: the first
        ([(None, True), ("../target/", True)], 1),  # a set that names no corpus fits none
        ([("../target/../target", False), ("../target", False)], 0),
    ],
)
def test_preferred_eval_set(tmp_path, files, index):
    folder = tmp_path / "eval_sets"
    listed = []
    for i, spec in enumerate(files):
        text = "cases: [unclosed" if spec == "broken" else eval_yaml(spec[0], answerable=spec[1])
        listed.append(EvalSetFile(f"eval_sets/{i}.yaml", write(folder / f"{i}.yaml", text)))
    (tmp_path / "target").mkdir()
    assert preferred_eval_set(listed, tmp_path / "target") == index


def test_preferred_eval_set_by_expected_ids(tmp_path):
    """A set naming the corpus by another path still fits when the corpus has every entry it expects."""
    folder = tmp_path / "eval_sets"
    listed = [
        EvalSetFile("eval_sets/0.yaml", write(folder / "0.yaml", eval_yaml("../elsewhere", answerable=True))),
        EvalSetFile("eval_sets/1.yaml", write(folder / "1.yaml", eval_yaml("../elsewhere", answerable=True))),
    ]
    (tmp_path / "target").mkdir()
    assert preferred_eval_set(listed, tmp_path / "target", known_ids=["x/Other"]) == 0  # none fits: the first
    listed[0] = EvalSetFile("eval_sets/0.yaml", write(folder / "0.yaml", eval_yaml("../elsewhere", answerable=False)))
    assert preferred_eval_set(listed, tmp_path / "target", known_ids=["a/B"]) == 1  # has every expected id (a/B)


def test_preferred_eval_set_of_the_real_files():
    files = eval_set_files(shared_dir=SHARED)
    assert files[preferred_eval_set(files, SAMPLE_CORPUS)].label == "eval_sets/sample-ops-alerts.yaml"
    needs_shared(RUNBOOKS, RUNBOOKS_EVAL, RUNBOOKS_EVAL.with_name("runbooks-alert-summaries-unanswerable.yaml"))
    # the unanswerable runbooks set sorts first ('-' < '.'), but the one with right answers is preferred
    labels = [f.label for f in files]
    assert labels.index("shared/eval_sets/runbooks-alert-summaries-unanswerable.yaml") < labels.index(
        "shared/eval_sets/runbooks-alert-summaries.yaml"
    )
    assert files[preferred_eval_set(files, RUNBOOKS)].label == "shared/eval_sets/runbooks-alert-summaries.yaml"


# --- known_corpora -----------------------------------------------------------------------------------
def test_configured_corpus_first_even_when_missing(base_settings, tmp_path):
    shared = tmp_path / "shared"
    for name in ("zeta", "alpha", ".hidden"):
        (shared / "corpora" / name).mkdir(parents=True)
    write(shared / "corpora" / "README.md")
    settings = base_settings.with_(corpus_dir=tmp_path / "mine")  # does not exist
    assert settings.collection == "Kb_mine_bge_small"
    got = known_corpora(settings, shared_dir=shared)
    assert got == [
        CorpusChoice("mine", (tmp_path / "mine").resolve(), "Kb_mine_bge_small"),
        CorpusChoice("sample_corpus", SAMPLE_CORPUS.resolve(), collection_for(SAMPLE_CORPUS)),
        CorpusChoice("alpha", (shared / "corpora" / "alpha").resolve(), "Kb_alpha_bge_small"),
        CorpusChoice("zeta", (shared / "corpora" / "zeta").resolve(), "Kb_zeta_bge_small"),
    ]


def test_the_configured_sample_corpus_is_listed_once_in_its_collection(base_settings, tmp_path):
    settings = base_settings.with_(corpus_dir=SAMPLE_CORPUS / ".." / "sample_corpus", collection="TestSample")
    got = known_corpora(settings, shared_dir=tmp_path / "no-shared", extra=[SAMPLE_CORPUS, str(SAMPLE_CORPUS)])
    assert got == [CorpusChoice("sample_corpus", SAMPLE_CORPUS.resolve(), "TestSample")]


def test_extras_are_deduplicated_skipped_when_missing_and_get_unique_labels(base_settings, tmp_path):
    shared = tmp_path / "shared"
    (shared / "corpora" / "runbooks").mkdir(parents=True)
    (tmp_path / "a" / "runbooks").mkdir(parents=True)
    (tmp_path / "b" / "runbooks").mkdir(parents=True)
    (tmp_path / "c" / "sample_corpus").mkdir(parents=True)
    extra = [
        tmp_path / "a" / "runbooks",
        tmp_path / "gone",
        shared / "corpora" / "runbooks",
        str(tmp_path / "b" / "runbooks"),
        tmp_path / "c" / "sample_corpus",
        tmp_path / "a" / "x" / ".." / "runbooks",
    ]
    got = known_corpora(base_settings, shared_dir=shared, extra=extra)
    assert [(c.label, c.path) for c in got] == [
        ("sample_corpus", SAMPLE_CORPUS.resolve()),
        ("runbooks", (shared / "corpora" / "runbooks").resolve()),
        ("runbooks-2", (tmp_path / "a" / "runbooks").resolve()),
        ("runbooks-3", (tmp_path / "b" / "runbooks").resolve()),
        ("sample_corpus-2", (tmp_path / "c" / "sample_corpus").resolve()),
    ]
    # each in its own collection: same-named folders must not share (and overwrite) one
    assert [c.collection for c in got] == [
        base_settings.collection,
        "Kb_runbooks_bge_small",
        "Kb_runbooks_bge_small_2",
        "Kb_runbooks_bge_small_3",
        f"{base_settings.collection}_2",
    ]


def test_the_configured_corpus_keeps_its_collection_over_a_same_named_folder(base_settings, tmp_path):
    mine = tmp_path / "copy" / "sample_corpus"
    mine.mkdir(parents=True)
    settings = base_settings.with_(corpus_dir=mine)
    assert settings.collection == collection_for(SAMPLE_CORPUS)
    got = known_corpora(settings, shared_dir=tmp_path / "no-shared")
    assert got == [
        CorpusChoice("sample_corpus", mine.resolve(), settings.collection),
        CorpusChoice("sample_corpus-2", SAMPLE_CORPUS.resolve(), f"{settings.collection}_2"),
    ]


def test_known_corpora_with_the_real_shared_folder(base_settings):
    needs_shared(RUNBOOKS, KUBEVIRT)
    got = known_corpora(base_settings)
    labels = [c.label for c in got]
    assert labels[0] == "sample_corpus" and labels.index("kubevirt") < labels.index("runbooks")  # the shared ones sorted
    runbooks = got[labels.index("runbooks")]
    assert runbooks.path == RUNBOOKS.resolve() and runbooks.collection == "Kb_runbooks_bge_small"
    assert got[labels.index("kubevirt")].path == KUBEVIRT.resolve()


def test_each_embedding_model_has_its_own_collection(base_settings, tmp_path):
    shared = tmp_path / "shared"
    (shared / "corpora" / "runbooks").mkdir(parents=True)
    by_model = {
        model: known_corpora(base_settings.with_(embedding_model=model), shared_dir=shared)[-1].collection
        for model in ("bge-small-en-v1.5", "all-MiniLM-L6-v2", "e5-small-v2")
    }
    assert by_model == {
        "bge-small-en-v1.5": "Kb_runbooks_bge_small",
        "all-MiniLM-L6-v2": "Kb_runbooks_minilm",
        "e5-small-v2": "Kb_runbooks_e5_small",
    }


def test_folders_added_in_the_app_are_remembered_once_in_order_and_offered_in_their_own_collection(base_settings, tmp_path):
    settings = base_settings.with_(data_dir=tmp_path / "data")
    assert added_corpora(settings) == []  # no file yet
    notes, runbooks = tmp_path / "a" / "notes", tmp_path / "b" / "runbooks"
    for folder in (notes, runbooks):
        write(folder / "x.md", "# X\n")
    remember_corpus(settings, notes)
    remember_corpus(settings, runbooks)
    remember_corpus(settings, tmp_path / "a" / ".." / "a" / "notes")  # the same folder: once
    assert added_corpora(settings) == [notes.resolve(), runbooks.resolve()]
    choices = known_corpora(settings, shared_dir=tmp_path / "no-shared", extra=added_corpora(settings))
    by_label = {c.label: c for c in choices}
    assert by_label["notes"].collection == collection_for(notes, settings.embedding_model)
    assert len({c.collection for c in choices}) == len(choices)  # each its own collection
    (tmp_path / "data" / "added-corpora.json").write_text("{not json", encoding="utf-8")
    assert added_corpora(settings) == []  # an unreadable file offers nothing, and breaks nothing
