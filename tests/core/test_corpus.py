import re

import pytest

from retrieval.core.corpus import close_ids, corpus_signature, load_corpus, open_folder, parse_entry
from retrieval.errors import CorpusError, EntryNotFound

from ..conftest import RUNBOOKS, SAMPLE_CORPUS, needs_shared


def write(root, rel, content):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_sample_corpus_is_rich():
    corpus = load_corpus(SAMPLE_CORPUS)
    assert corpus.problems == ()
    assert len(corpus.entries) >= 40
    assert len(corpus.domains) >= 5
    assert sum(1 for e in corpus.entries if e.keywords) >= 40
    assert sum(1 for e in corpus.entries if e.entities) >= 40


def test_entry_ids_domains_and_fields(tmp_path):
    write(
        tmp_path,
        "kubernetes/KubePodCrashLooping.md",
        "---\ntitle: Pod crash looping\nkeywords: [crashloop]\ntags: restart, backoff\naliases: [KPCL]\n"
        "entities: [kubelet]\n---\nBody text.",
    )
    write(tmp_path, "databases/pg/Lag.md", "---\ntitle: Lag\ncategory: postgres\n---\nBody.")
    write(tmp_path, "Top.md", "---\ntitle: Top level\n---\nBody.")
    corpus = load_corpus(tmp_path)
    by_id = corpus.by_id()
    assert sorted(by_id) == ["Top", "databases/pg/Lag", "kubernetes/KubePodCrashLooping"]
    kube = by_id["kubernetes/KubePodCrashLooping"]
    assert kube.domain == "kubernetes"  # no domain field: the top-level folder
    assert kube.keywords == ("crashloop", "restart", "backoff", "KPCL")
    assert kube.entities == ("kubelet",)
    assert by_id["databases/pg/Lag"].domain == "postgres"  # `category` is accepted
    assert by_id["Top"].domain == "general"


def test_runbooks_take_their_folder_as_domain():
    needs_shared()
    corpus = load_corpus(RUNBOOKS)
    assert len(corpus.entries) == 108 and corpus.problems == ()
    assert corpus.by_id()["kubernetes/KubePodCrashLooping"].domain == "kubernetes"
    assert len(corpus.domains) == 8


@pytest.mark.parametrize(
    "name, content, reason",
    [
        ("broken.md", "---\ntitle: [unclosed\n---\nbody", "frontmatter is not valid YAML"),
        ("wrongtype.md", "---\ntitle: {a: 1}\n---\nbody", "field 'title'"),
        ("kwtype.md", "---\ntitle: t\nkeywords: {a: 1}\n---\nbody", "field 'keywords'"),
        ("domaintype.md", "---\ntitle: t\ndomain: [a, b]\n---\nbody", "field 'domain'"),
        ("binary.md", b"\x00\x01\x02PNG", "binary file"),
        ("latin1.md", "---\ntitle: caf\xe9\n---\n".encode("latin-1"), "not UTF-8"),
        ("empty.md", "", "file is empty"),
        ("huge.md", "x" * 2_100_000, "byte limit"),
        ("frontonly.md", "---\ntitle: ''\n---\n", "nothing to index"),
    ],
)
def test_bad_files_are_reported_by_name_and_the_rest_still_loads(tmp_path, name, content, reason):
    write(tmp_path, "ops/Good.md", "---\ntitle: A good entry\n---\nUseful text.")
    bad = write(tmp_path, f"ops/{name}", content)
    corpus = load_corpus(tmp_path)
    assert [e.entry_id for e in corpus.entries] == ["ops/Good"]
    assert len(corpus.problems) == 1
    assert corpus.problems[0].path == str(bad)
    assert str(bad) in corpus.problems[0].reason and reason in corpus.problems[0].reason


def test_frontmatter_only_with_title_is_kept(tmp_path):
    write(tmp_path, "ops/TitleOnly.md", "---\ntitle: Only a title\n---\n")
    assert [e.title for e in load_corpus(tmp_path).entries] == ["Only a title"]


def test_duplicate_ids_differing_in_case_are_reported(tmp_path):
    write(tmp_path, "ops/Disk.md", "---\ntitle: one\n---\nx")
    write(tmp_path, "ops/disk.md", "---\ntitle: two\n---\nx")
    corpus = load_corpus(tmp_path)
    assert len(corpus.entries) == 1
    assert "duplicate entry id" in corpus.problems[0].reason


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_content_hash_changes_with_indexed_content():
    a = parse_entry("x/A", b"---\ntitle: A\n---\nbody", "A.md", "x")
    b = parse_entry("x/A", b"---\ntitle: A\n---\nbody changed", "A.md", "x")
    c = parse_entry("x/A", b"---\ntitle: A\nweight: 3\n---\nbody", "A.md", "x")
    assert a.content_hash != b.content_hash
    assert a.content_hash == c.content_hash  # fields that are not indexed do not count


def test_the_corpus_signature_changes_when_a_file_is_added_written_or_removed_and_only_then(tmp_path):
    (tmp_path / "ops").mkdir()
    page = tmp_path / "ops" / "DiskFull.md"
    page.write_text("---\ntitle: Disk full\n---\nFree space.\n", encoding="utf-8")
    first = corpus_signature(tmp_path)
    assert corpus_signature(tmp_path) == first
    (tmp_path / "notes.txt").write_text("not markdown", encoding="utf-8")  # not a corpus file
    assert corpus_signature(tmp_path) == first
    added = tmp_path / "ops" / "NodeDown.md"
    added.write_text("---\ntitle: Node down\n---\nReboot.\n", encoding="utf-8")
    second = corpus_signature(tmp_path)
    assert second != first
    page.write_text("---\ntitle: Disk full\n---\nFree more space.\n", encoding="utf-8")
    third = corpus_signature(tmp_path)
    assert third != second
    added.unlink()
    assert corpus_signature(tmp_path) not in (second, third)


def test_an_entry_without_a_frontmatter_title_takes_its_first_level_one_heading(tmp_path):
    write(tmp_path, "billing/currency-rounding.md", "Intro line.\n\n# Currency rounding errors\n\n## Cause\n\n# Later heading\n")
    write(tmp_path, "billing/closed-heading.md", "#   Invoice totals drift   ##\n\nText.")
    write(tmp_path, "billing/fenced.md", "```sh\n# not a heading, a shell comment\n```\n\n# Refund delays\n")
    write(tmp_path, "billing/sub-only.md", "## Only a second-level heading\n\nText.")
    write(tmp_path, "billing/no-heading.md", "Plain text, no heading.\n#hashtag is no heading either")
    write(tmp_path, "billing/titled.md", "---\ntitle: The frontmatter title\n---\n# A heading\n")
    write(tmp_path, "billing/fields-no-title.md", "---\ntags: [tax]\n---\n# Tax rate lookups\n")
    titles = {e.entry_id.split("/")[1]: e.title for e in load_corpus(tmp_path).entries}
    assert titles == {
        "currency-rounding": "Currency rounding errors",
        "closed-heading": "Invoice totals drift",
        "fenced": "Refund delays",
        "sub-only": "sub-only",  # no level-one heading: the file name
        "no-heading": "no-heading",
        "titled": "The frontmatter title",  # frontmatter wins
        "fields-no-title": "Tax rate lookups",
    }, titles


def test_open_folder_names_the_path_of_a_folder_that_cannot_be_a_corpus(tmp_path):
    write(tmp_path / "docs", "notes.txt", "not markdown")
    file = write(tmp_path, "file.md", "# A file\n")
    for path, reason in [
        (tmp_path / "missing", "no such folder"),
        (file, "is a file, not a folder"),
        (tmp_path / "docs", "holds no markdown (*.md) files"),
        ("  ", "type the path of a folder"),
    ]:
        with pytest.raises(CorpusError, match=re.escape(reason)) as caught:
            open_folder(path)
        assert str(path).strip() in str(caught.value), caught.value


def test_open_folder_loads_the_entries_and_reports_the_files_that_fail(tmp_path):
    write(tmp_path, "billing/rounding.md", "# Currency rounding errors\nText.")
    write(tmp_path, "billing/titled.md", "---\ntitle: Titled\n---\nText.")
    write(tmp_path, "bad.md", "---\ntitle: {a: 1}\n---\nText.")
    corpus = open_folder(f"  {tmp_path}  ")
    assert [e.entry_id for e in corpus.without_frontmatter] == ["billing/rounding"]
    assert corpus.domains == ["billing"]
    (problem,) = corpus.problems
    assert "bad.md (field 'title')" in problem.reason


SAMPLE_IDS = tuple(e.entry_id for e in load_corpus(SAMPLE_CORPUS).entries)


@pytest.mark.parametrize(
    ("given", "first"),
    [
        ("PodCrashLoopBackOff", "kubernetes/PodCrashLoopBackOff"),  # the file name without its domain folder
        ("databases/PodCrashLoopBackOff", "kubernetes/PodCrashLoopBackOff"),  # the wrong domain folder
        ("kubernetes/podcrashloopbackoff", "kubernetes/PodCrashLoopBackOff"),  # another case
        ("storage/VolumeDiskFul", "storage/VolumeDiskFull"),  # a typo
        ("kubernetes/NodeNotRedy", "kubernetes/NodeNotReady"),
    ],
)
def test_close_ids_put_the_nearest_id_first(given, first):
    close = close_ids(given, SAMPLE_IDS)
    assert close[0] == first
    assert 1 <= len(close) <= 3 and len(set(close)) == len(close)
    assert set(close) <= set(SAMPLE_IDS)


def test_close_ids_name_nothing_for_an_id_like_none_and_at_most_n():
    assert close_ids("zzz/qqq", SAMPLE_IDS) == ()
    assert close_ids("kubernetes/NodeNotReady", []) == ()
    # the shared domain folder alone does not make two ids close
    assert close_ids("kubernetes/NodeNotRedy", SAMPLE_IDS) == ("kubernetes/NodeNotReady",)
    assert close_ids("x/Disk", ["a/Disks", "b/Disk1", "c/Dusk", "d/Other"], n=2) == ("a/Disks", "b/Disk1")
    # every id ending in the same file name comes before a merely similar spelling, however many domains hold it
    ids = ["a/Disk", "b/Disk", "c/Disks", "d/Disk"]
    assert close_ids("x/Disk", ids) == ("a/Disk", "b/Disk", "d/Disk")
    assert close_ids("x/Disk", ids, n=1) == ("a/Disk",)


def test_entry_not_found_names_the_close_ids():
    err = EntryNotFound("kubernetes/NodeNotRedy", 48, close_ids("kubernetes/NodeNotRedy", SAMPLE_IDS))
    assert err.entry_id == "kubernetes/NodeNotRedy" and err.close[0] == "kubernetes/NodeNotReady"
    assert "(48 entries)" in str(err) and "did you mean kubernetes/NodeNotReady" in str(err)
    assert "did you mean" not in str(EntryNotFound("zzz/qqq", 48))
