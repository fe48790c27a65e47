from retrieval.config import REPO_ROOT
from retrieval.core.corpus import Entry, load_corpus
from retrieval.core.probes import PARAGRAPH_WORDS, STYLES, draw_probes, probes_of

BODY = """# DiskAlmostFull

## Meaning

The data volume of the `primary` is **almost full**: see [the guide](http://example.org/guide). Writes will fail soon.
- It fills at 2 GB an hour.

```bash
df -h /var/lib/data
```

## Impact

Clients cannot write. Replicas stop following the primary once the write-ahead log can no longer be archived, and
every minute after that adds to the time a failover would need.

| column | value |
|---|---|
"""


def entry(title="Disk almost full", text=BODY, keywords=("disk full", "no space"), entities=("PostgreSQL",)):
    return Entry("db/DiskAlmostFull", title, "db", text, keywords, entities)


def test_each_style_is_cut_from_the_entry_s_prose():
    probes = {p.style: p.text for p in probes_of(entry())}
    assert list(probes) == ["title", "sentence", "paragraph", "keywords"] and set(probes) <= set(STYLES)
    assert probes["title"] == "Disk almost full"
    assert probes["sentence"] == "The data volume of the primary is almost full: see the guide."
    paragraph = probes["paragraph"]
    assert paragraph.startswith(probes["sentence"] + " Writes will fail soon. It fills at 2 GB an hour. Clients cannot")
    assert paragraph.endswith("the time a failover would need.") and len(paragraph.split()) == 53  # all the prose there is
    longer = {p.style: p.text for p in probes_of(entry(text=BODY + "\nMore words here. " * 30))}
    assert len(longer["paragraph"].split()) == PARAGRAPH_WORDS  # cut at a long alert description's length
    assert probes["keywords"] == "disk full no space PostgreSQL"
    for text in (probes["sentence"], paragraph):  # no heading, code, table or markup in them
        assert "DiskAlmostFull" not in text and "df -h" not in text and "|" not in text and "`" not in text
        assert "**" not in text and "http" not in text


def test_keep_title_puts_the_title_line_in_front():
    probes = {p.style: p.text for p in probes_of(entry(), keep_title=True)}
    assert probes["sentence"].startswith("DiskAlmostFull The data volume")
    assert probes["paragraph"].startswith("DiskAlmostFull The data volume")


def test_an_entry_with_little_text_gets_the_styles_it_has_text_for():
    short = entry(text="Restart it.", keywords=(), entities=())
    assert [p.style for p in probes_of(short)] == ["title"]  # under four words: no prose
    one_sentence = entry(text="The disk of the primary is almost full.", keywords=("disk",), entities=())
    assert [p.style for p in probes_of(one_sentence)] == ["title", "sentence"]  # no longer paragraph, one keyword


def test_a_large_knowledge_base_is_sampled_the_same_way_each_time():
    corpus = load_corpus(REPO_ROOT / "sample_corpus")
    every = draw_probes(corpus.entries)
    assert {p.entry_id for p in every} == {e.entry_id for e in corpus.entries}
    some = draw_probes(corpus.entries, max_entries=10)
    assert len({p.entry_id for p in some}) == 10 and some == draw_probes(reversed(corpus.entries), max_entries=10)
    assert {p.entry_id for p in draw_probes(corpus.entries, max_entries=10, seed=1)} != {p.entry_id for p in some}
