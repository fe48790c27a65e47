"""Judged cases appended to eval set files: the rest of the file stays byte for byte, a bad case leaves the
file untouched and names the field, new sets, unique case ids."""

from __future__ import annotations

import difflib
import re
import shutil
import threading
from pathlib import Path

import pytest

from retrieval.config import REPO_ROOT
from retrieval.errors import EvalSetError
from retrieval.evals.catalog import eval_set_files
from retrieval.evals.sets import load_eval_set
from retrieval.lab.judgments import (
    Judgment,
    append_case,
    create_eval_set,
    judged_set_files,
    new_set_path,
    shown_not_relevant,
    suggest_case_id,
    suggest_domain,
    target_sets,
)

ALERTS = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"
UNANSWERABLE = REPO_ROOT / "eval_sets" / "sample-ops-unanswerable.yaml"
SAMPLE_IDS = ("kubernetes/PodCrashLoopBackOff", "databases/PostgresDiskFull", "databases/PostgresReplicationLag")


def copy_of(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    return dst


def only_an_insert(before: bytes, after: bytes) -> list[str]:
    """The lines `after` adds to `before`, failing unless that is the only change (every other byte kept)."""
    a, b = before.decode().splitlines(keepends=True), after.decode().splitlines(keepends=True)
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    assert len(ops) == 1 and ops[0][0] == "insert", ops
    _, _, _, j1, j2 = ops[0]
    assert b[:j1] + b[j2:] == a  # removing the new lines gives the original bytes back
    return b[j1:j2]


@pytest.mark.parametrize("src", [ALERTS, UNANSWERABLE])
def test_append_keeps_every_other_byte_and_the_case_reads_back(tmp_path, src):
    path = copy_of(src, tmp_path)
    before_bytes, before = path.read_bytes(), load_eval_set(path)
    judgment = Judgment('Pod is "crash" looping: again #3', ("kubernetes/PodCrashLoopBackOff",), "kubernetes", source="Lookup")
    out = append_case(path, judgment, known_ids=SAMPLE_IDS)
    added = only_an_insert(before_bytes, path.read_bytes())
    assert len(added) == 4 and added[0].lstrip().startswith("- id: PodIsCrashLoopingAgain")
    after = load_eval_set(path)
    assert after.cases[:-1] == before.cases
    case = after.cases[-1]
    assert (case.id, case.query, case.expected, case.domain) == (
        "PodIsCrashLoopingAgain",
        'Pod is "crash" looping: again #3',
        {"kubernetes/PodCrashLoopBackOff": 1},
        "kubernetes",
    )
    assert (out.case_id, out.cases, out.created, out.set_name) == (
        "PodIsCrashLoopingAgain",
        len(before.cases) + 1,
        False,
        before.name,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no scratch file left behind


def test_the_shown_results_left_unmarked_and_the_call_are_written_to_the_case(tmp_path):
    path = copy_of(ALERTS, tmp_path)
    before_bytes = path.read_bytes()
    shown = ["databases/PostgresReplicationLag", "databases/PostgresDiskFull", "kubernetes/PodCrashLoopBackOff"]
    unmarked = shown_not_relevant(shown, ["databases/PostgresDiskFull"])
    assert unmarked == ("databases/PostgresReplicationLag", "kubernetes/PodCrashLoopBackOff")
    assert shown_not_relevant(shown, []) == ()  # none is relevant: the case says no entry answers it
    judgment = Judgment("disk full again", ("databases/PostgresDiskFull",), not_relevant=unmarked, invocation="1a2b")
    append_case(path, judgment, known_ids=SAMPLE_IDS)
    added = only_an_insert(before_bytes, path.read_bytes())
    assert any(line.strip().startswith("not_relevant: [databases/PostgresReplicationLag,") for line in added), added
    case = load_eval_set(path).cases[-1]
    assert (case.expected, case.not_relevant, case.invocation) == ({"databases/PostgresDiskFull": 1}, unmarked, "1a2b")


def test_an_unanswerable_judgment_is_an_empty_expected_list(tmp_path):
    path = copy_of(UNANSWERABLE, tmp_path)
    append_case(path, Judgment("Kafka consumer lag keeps growing", ()))
    case = load_eval_set(path).cases[-1]
    assert case.expected == {} and not case.answerable and case.domain is None
    assert "expected: []" in path.read_text()


@pytest.mark.parametrize(
    "text",
    [
        # cases not last, a comment after the last case, the next key after it
        "name: t\ncases:\n  - id: a\n    query: first\n    expected: [x/a]  # note\n  # a trailing comment\n\nextra: 1\n",
        # items at column 0, no final newline
        "name: t\ncases:\n- id: a\n  query: first\n  expected: [x/a]",
        # CRLF line ends
        "name: t\r\ncases:\r\n  - id: a\r\n    query: first\r\n    expected:\r\n      - x/a\r\n",
        # a block scalar last, with a '#' line that is text, not a comment
        "name: t\ncases:\n  - id: a\n    query: |\n      first line\n      # not a comment\n    expected: []\n",
        # ... and a block scalar ending the last case, its last line starting with '#', then a comment
        "name: t\ncases:\n  - id: a\n    expected: []\n    query: |\n      first line\n      # not a comment\n\n  # comment\n",
    ],
    ids=["not-last", "column-0", "crlf", "block-scalar", "block-scalar-last"],
)
def test_append_to_other_layouts(tmp_path, text):
    path = tmp_path / "t.yaml"
    path.write_bytes(text.encode())
    before = load_eval_set(path)
    append_case(path, Judgment("second query", ("x/b",)))
    kept = text if text.endswith("\n") else text + "\n"  # a last line without its newline gets one, nothing else
    only_an_insert(kept.encode(), path.read_bytes())
    after = load_eval_set(path)
    assert after.cases[:-1] == before.cases
    assert (after.cases[-1].query, after.cases[-1].expected) == ("second query", {"x/b": 1})
    if "\r\n" in text:
        assert b"\n" not in path.read_bytes().replace(b"\r\n", b"")


@pytest.mark.parametrize(
    "judgment, known, field",
    [
        (Judgment("x" * 2001, ("databases/PostgresDiskFull",)), None, "field 'query'"),
        (Judgment("   ", ()), None, "field 'query'"),
        (Judgment("disk is full", ("databases/NoSuchEntry",)), SAMPLE_IDS, "field 'expected'"),
        (Judgment("disk is full", ("databases/PostgresDiskFull",), case_id="PostgresDiskFull"), None, "field 'id'"),
        (Judgment("disk is full", ("databases/PostgresDiskFull",), not_relevant=("x/Gone",)), SAMPLE_IDS, "field 'not_relevant'"),
    ],
    ids=["query-too-long", "query-empty", "unknown-entry", "id-taken", "unknown-not-relevant"],
)
def test_a_bad_case_leaves_the_file_untouched_and_names_file_and_field(tmp_path, judgment, known, field):
    path = copy_of(ALERTS, tmp_path)
    before = path.read_bytes()
    with pytest.raises(EvalSetError) as err:
        append_case(path, judgment, known_ids=known)
    assert str(path) in str(err.value) and field in str(err.value)
    assert ".judging" not in str(err.value)  # the error names the set, not the scratch copy
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [ALERTS.name]


def test_a_set_that_does_not_load_gets_nothing_appended(tmp_path):
    path = tmp_path / "broken.yaml"
    for text in ("name: b\ncases:\n  - id: a\n    expected: [x/a]\n", "name: b\ncases: [{id: a, query: q, expected: []}]\n"):
        path.write_text(text)
        with pytest.raises(EvalSetError, match=r"field 'query'|field 'cases'"):
            append_case(path, Judgment("a query", ()))
        assert path.read_text() == text


def test_a_new_set_under_a_folder_names_its_corpus_and_loads(tmp_path):
    (tmp_path / "eval_sets").mkdir()
    path = new_set_path("judged-today", tmp_path / "eval_sets")
    assert path == tmp_path / "eval_sets" / "judged-today.yaml"
    out = create_eval_set(
        path,
        Judgment("disk full on the primary", ("databases/PostgresDiskFull",), "databases"),
        corpus_dir=REPO_ROOT / "sample_corpus",
    )
    assert out.created and out.cases == 1 and out.case_id == "DiskFullOnThePrimary"
    loaded = load_eval_set(path)
    assert loaded.name == "judged-today" and loaded.corpus_dir == (REPO_ROOT / "sample_corpus").resolve()
    assert loaded.cases[0].expected == {"databases/PostgresDiskFull": 1}
    # it grows like any set, and is never overwritten by a new one of the same name
    append_case(path, Judgment("disk full on the primary", ()))
    assert [c.id for c in load_eval_set(path).cases] == ["DiskFullOnThePrimary", "DiskFullOnThePrimary-2"]
    with pytest.raises(EvalSetError, match="already exists"):
        create_eval_set(path, Judgment("another", ()))
    assert len(load_eval_set(path).cases) == 2


def test_a_new_set_with_a_bad_case_is_not_created(tmp_path):
    with pytest.raises(EvalSetError, match="field 'expected'"):
        create_eval_set(tmp_path / "n.yaml", Judgment("q", ("no/such",)), known_ids=SAMPLE_IDS)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x" * 81])
def test_new_set_names_are_refused(name):
    with pytest.raises(EvalSetError, match="set name"):
        new_set_path(name, Path("judged"))


@pytest.mark.parametrize(
    "query, existing, expected",
    [
        ("Pod is crash looping.", [], "PodIsCrashLooping"),
        ("disk full on the primary db today", [], "DiskFullOnThePrimary"),
        ("Pod is crash looping.", ["PodIsCrashLooping"], "PodIsCrashLooping-2"),
        ("Pod is crash looping.", ["PodIsCrashLooping", "PodIsCrashLooping-2"], "PodIsCrashLooping-3"),
        ("¿¡ !!", [], "Case"),
        ("etcd 3.5 leader", [], "Etcd35Leader"),
    ],
)
def test_suggested_case_ids(query, existing, expected):
    assert suggest_case_id(query, existing) == expected


def test_case_ids_stay_unique_however_often_a_query_is_judged(tmp_path):
    path = copy_of(UNANSWERABLE, tmp_path)
    for i in range(4):  # the same query, judged four ways
        append_case(path, Judgment("Kafka lag", (f"streaming/Lag{i}",) if i else ()))
    ids = [c.id for c in load_eval_set(path).cases]
    assert len(ids) == len(set(ids))
    assert ids[-4:] == ["KafkaLag", "KafkaLag-2", "KafkaLag-3", "KafkaLag-4"]


@pytest.mark.parametrize(
    "domains, routed, expected",
    [(["db", "db"], None, "db"), (["db", "k8s"], "db", None), ([], "k8s", "k8s"), ([], None, None), ([None], "k8s", None)],
)
def test_suggested_domain(domains, routed, expected):
    assert suggest_domain(domains, routed) == expected


def test_target_sets_list_the_known_sets_with_their_fit(tmp_path):
    (tmp_path / "repo" / "eval_sets").mkdir(parents=True)
    for src in (ALERTS, UNANSWERABLE):
        shutil.copyfile(src, tmp_path / "repo" / "eval_sets" / src.name)
    (tmp_path / "repo" / "eval_sets" / "zz-broken.yaml").write_text("cases: 3\n")
    files = eval_set_files(repo_root=tmp_path / "repo", shared_dir=tmp_path / "none")
    found = target_sets(["kubernetes/PodCrashLoopBackOff"], files)
    by_label = {t.label: t for t in found}
    assert list(by_label) == [
        "eval_sets/sample-ops-alerts.yaml",
        "eval_sets/sample-ops-unanswerable.yaml",
        "eval_sets/zz-broken.yaml",
    ]
    assert by_label["eval_sets/sample-ops-alerts.yaml"].fits is False  # expects 48 entries, 47 unknown here
    assert by_label["eval_sets/sample-ops-unanswerable.yaml"].fits is True
    assert by_label["eval_sets/sample-ops-unanswerable.yaml"].cases == 10
    assert "field 'cases'" in (by_label["eval_sets/zz-broken.yaml"].error or "")


def test_judgments_added_at_once_all_land_with_different_ids(tmp_path):
    path = copy_of(UNANSWERABLE, tmp_path)
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def judge(n: int) -> None:
        start.wait(timeout=60)
        try:
            append_case(path, Judgment("Kafka lag", (f"streaming/Lag{n}",)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=judge, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    ids = [c.id for c in load_eval_set(path).cases]
    assert len(ids) == 16 and len(set(ids)) == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == [UNANSWERABLE.name]


def test_an_unanswerable_set_for_another_corpus_does_not_fit(tmp_path):
    """A set expecting no entry fits any corpus by its ids; one that names another corpus is not offered."""
    (tmp_path / "repo" / "eval_sets").mkdir(parents=True)
    shutil.copyfile(UNANSWERABLE, tmp_path / "repo" / "eval_sets" / UNANSWERABLE.name)
    files = eval_set_files(repo_root=tmp_path / "repo", shared_dir=tmp_path / "none")
    assert [t.fits for t in target_sets(SAMPLE_IDS, files, tmp_path / "repo" / "sample_corpus")] == [True]  # its corpus: field
    assert [t.fits for t in target_sets(SAMPLE_IDS, files, tmp_path / "runbooks")] == [False]


def test_the_same_judgment_twice_is_refused_and_the_file_kept(tmp_path):
    path = copy_of(ALERTS, tmp_path)
    append_case(path, Judgment("Pod keeps restarting", ("kubernetes/PodCrashLoopBackOff",)))
    before = path.read_bytes()
    with pytest.raises(EvalSetError, match=re.escape("case 'PodKeepsRestarting' already holds this judgment")):
        append_case(path, Judgment("  pod keeps   restarting ", ("kubernetes/PodCrashLoopBackOff",), case_id="Other"))
    assert path.read_bytes() == before
    # the same query judged otherwise is a new case
    append_case(path, Judgment("Pod keeps restarting", ()))
    assert load_eval_set(path).cases[-1].id == "PodKeepsRestarting-2"


def test_judged_sets_are_listed_from_their_folder_and_made_on_the_first_judgment(tmp_path):
    folder = tmp_path / "data" / "judged-eval-sets"
    (tmp_path / "data").mkdir()
    assert judged_set_files(folder) == []
    out = create_eval_set(new_set_path("judged-pods", folder), Judgment("Pod keeps restarting", ()))
    assert out.created and Path(out.path).parent == folder
    assert [(f.label, f.path) for f in judged_set_files(folder)] == [("judged/judged-pods.yaml", folder / "judged-pods.yaml")]
