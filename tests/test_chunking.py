from retrieval.chunking import chunk_entry
from retrieval.corpus import Entry


def test_short_entry_is_one_chunk(embedder):
    e = Entry("a/B", "Title", "a", "Short body.")
    chunks = chunk_entry(e, embedder.tokenizer, embedder.max_tokens)
    assert [(c.index, c.count) for c in chunks] == [(0, 1)]
    assert chunks[0].text == "Title\nShort body."


def test_long_entry_windows_fit_the_model_and_cover_the_body(embedder):
    words = [f"word{i}" for i in range(1500)]
    e = Entry("a/Long", "A long title", "a", " ".join(words))
    chunks = chunk_entry(e, embedder.tokenizer, embedder.max_tokens)
    assert len(chunks) > 3 and all(c.count == len(chunks) for c in chunks)
    assert all(embedder.count_tokens(c.text) + 2 <= embedder.max_tokens for c in chunks)
    assert all(c.text.startswith("A long title\n") for c in chunks)
    joined = " ".join(c.text for c in chunks)
    assert all(w in joined for w in (words[0], words[750], words[-1]))  # nothing is cut off
