from retrieval.core.chunking import chunk_entry, heading, heading_words, sections, stored_hash
from retrieval.core.corpus import Entry


def test_heading_words_split_the_title_and_file_name_once():
    assert heading_words(Entry("cdi/CDINotReady", "CDINotReady", "cdi", "")) == "CDI Not Ready"
    assert heading_words(Entry("k/KubePodCrashLooping", "Kube Pod Crash Looping", "k", "")) == "Kube Pod Crash Looping"
    e = Entry("db/PgLag", "Replication lag", "db", "")
    assert heading_words(e) == "Replication lag Pg"  # each word once, case aside
    assert heading(e) == "Replication lag (Replication lag Pg)"
    assert heading(Entry("a/B", "Title", "a", "")) == "Title (Title B)"


def test_sections_split_before_every_heading():
    body = "intro line\n# Name\n\n## Meaning\nIt fires.\n\n## Mitigation\nRestart it.\n"
    assert sections(body) == ["intro line", "# Name", "## Meaning\nIt fires.", "## Mitigation\nRestart it."]


def test_chunks_of_a_sectioned_entry(embedder):
    e = Entry("k/KubePodCrashLooping", "Kube Pod Crash Looping", "k", "## Meaning\nPod restarts.\n\n## Impact\nOutage.")
    chunks = chunk_entry(e, embedder.tokenizer, embedder.max_tokens)
    assert [c.text for c in chunks] == [
        "Kube Pod Crash Looping",
        "Kube Pod Crash Looping\n## Meaning\nPod restarts.",
        "Kube Pod Crash Looping\n## Impact\nOutage.",
    ]
    assert [(c.index, c.count, c.card) for c in chunks] == [(0, 3, True), (1, 3, False), (2, 3, False)]


def test_long_sections_are_windowed_within_the_model_and_cover_the_body(embedder):
    words = [f"word{i}" for i in range(1500)]
    e = Entry("a/Long", "A long title", "a", " ".join(words))
    chunks = chunk_entry(e, embedder.tokenizer, embedder.max_tokens)
    assert len(chunks) > 4 and all(c.count == len(chunks) for c in chunks)
    assert all(embedder.count_tokens(c.text) + 2 <= embedder.max_tokens for c in chunks)
    assert all(c.text.startswith("A long title\n") for c in chunks[1:])  # the name adds no word here
    joined = " ".join(c.text for c in chunks)
    assert all(w in joined for w in (words[0], words[750], words[-1]))  # nothing is cut off


def test_stored_hash_follows_the_content_and_the_index_version():
    a, b = Entry("a/B", "T", "a", "x"), Entry("a/B", "T", "a", "y")
    assert stored_hash(a) != stored_hash(b) and stored_hash(a).startswith(a.content_hash)
