import pytest

from retrieval.config import REPO_ROOT
from retrieval.core import hints as hints_module
from retrieval.core.corpus import Entry, load_corpus
from retrieval.core.hints import MAX_MATCHES, L0Index, named_keys
from retrieval.core.text import content_tokens


def entry(entry_id, title, domain, keywords=(), entities=(), text="body"):
    return Entry(entry_id, title, domain, text, tuple(keywords), tuple(entities))


ENTRIES = [
    entry("kubernetes/KubePodCrashLooping", "Kube Pod Crash Looping", "kubernetes", ["crashloopbackoff"], ["kubelet"]),
    entry("kubernetes/KubeNodeNotReady", "Kube Node Not Ready", "kubernetes", ["node not ready"]),
    entry("databases/PostgresDiskFull", "PostgreSQL cannot write", "databases", ["disk full", "no space left"], ["PostgreSQL"]),
    entry("storage/VolumeDiskFull", "Volume is out of space", "storage", ["disk full"], ["Ceph"]),
    entry("etcd/etcdNoLeader", "etcd has no leader", "etcd", [], ["etcd"]),
] + [entry(f"misc/Filler{i}", f"Unrelated filler article {i}", "misc") for i in range(20)]


def test_hint_data_is_structured_and_traceable():
    hints = L0Index(ENTRIES).match("Pods are crash looping again")
    assert hints.domains == ("kubernetes",)
    assert hints.matched_titles == ("Kube Pod Crash Looping",)
    top = hints.matches[0]
    assert top.entry_id == "kubernetes/KubePodCrashLooping"
    assert "title" in top.fields and top.score > 0
    assert {"pod crash looping", "crash looping"} <= {t.key for t in hints.matched_keywords}
    assert {"Pods are crash looping", "crash looping"} <= {t.term for t in hints.matched_keywords}  # as the query writes them


def test_keywords_entities_and_camel_case_names_match():
    idx = L0Index(ENTRIES)
    assert idx.match("CrashLoopBackOff on web-1").matches[0].entry_id == "kubernetes/KubePodCrashLooping"
    h = idx.match("KubePodCrashLooping fired")
    assert h.matches[0].entry_id == "kubernetes/KubePodCrashLooping"
    h = idx.match("PostgresDiskFull fired")  # the file name, split at its capitals
    assert h.matches[0].entry_id == "databases/PostgresDiskFull"
    assert "name" in h.matches[0].fields
    h = idx.match("kubelet restarts")
    assert h.entities == ("kubelet",)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("[FIRING:1] KubePodCrashLooping default/web-1", {"kubernetes/KubePodCrashLooping"}),  # the file name as written
        ("kube pod crash looping on web-1", {"kubernetes/KubePodCrashLooping"}),  # the whole title, in words
        ("Pods keep crash looping", set()),  # title words, not the whole title
        ("etcd has no leader since noon", {"etcd/etcdNoLeader"}),  # "etcd leader", stopwords aside
        ("Kube Node is Not Ready", {"kubernetes/KubeNodeNotReady"}),
        ("node not ready", set()),  # a keyword, not the name
    ],
)
def test_named_says_the_query_holds_the_whole_title_or_file_name(query, named):
    hints = L0Index(ENTRIES).match(query)
    assert {mt.entry_id for mt in hints.matches if mt.named} == named
    assert all(mt.to_dict()["named"] == (mt.entry_id in named) for mt in hints.matches)


def test_a_one_word_title_names_nothing():
    idx = L0Index([entry("docs/Overview", "Overview", "docs", ["overview"]), *ENTRIES[:2]])
    assert named_keys(idx.entries["docs/Overview"]) == ()
    assert named_keys(ENTRIES[0]) == ("kube pod crash looping",)  # title and file name agree: one key
    assert not any(mt.named for mt in idx.match("Overview of the cluster").matches)


def test_shared_keyword_names_several_domains_in_stable_order():
    idx = L0Index(ENTRIES)
    h = idx.match("Disk full!")
    assert set(h.domains) == {"databases", "storage"}
    # equal scores: ties are broken by entry id, every time
    assert [m.entry_id for m in h.matches] == ["databases/PostgresDiskFull", "storage/VolumeDiskFull"]
    assert [m.entry_id for m in L0Index(list(reversed(ENTRIES))).match("Disk full!").matches] == [m.entry_id for m in h.matches]


def test_no_match_and_stopword_only_queries():
    idx = L0Index(ENTRIES)
    for q in ["what is going on", "the and of", "", "🙂🙂", "\x00\x01"]:
        h = idx.match(q)
        assert h.matches == () and h.domains == () and h.matched_keywords == ()


def test_common_single_words_alone_do_not_match():
    h = L0Index(ENTRIES).match("filler")
    assert h.matches == ()  # 'filler' is in 20 of 25 titles: too common to say anything alone
    assert L0Index(ENTRIES).match("unrelated filler article 7").matches[0].entry_id == "misc/Filler7"


def test_domain_word_alone_is_not_a_match():
    assert L0Index(ENTRIES).match("kubernetes").matches == ()


def test_to_dict_carries_every_field():
    d = L0Index(ENTRIES).match("etcd has no leader").to_dict()
    assert set(d) == {"matched_titles", "matched_keywords", "domains", "entities", "matches", "total_matches"}
    assert d["domains"] == ["etcd"] and d["entities"] == ["etcd"] and d["total_matches"] == len(d["matches"])
    assert d["matches"][0]["fields"] == ["domain", "entity", "title"]


def test_empty_corpus_matches_nothing():
    assert L0Index([]).match("anything").matches == ()


def _crowd(n: int) -> list[Entry]:
    """n entries that share the keyword 'latency', spread over domains, with entities of their own."""
    domains = ["api", "db", "cache", "queue", "edge"]
    return [
        Entry(
            f"{domains[i % 5]}/Svc{i:03d}",
            f"Service {i:03d} slow",
            domains[i % 5],
            "body",
            ("latency", f"alpha{i % 7}"),
            (f"svc{i:03d}",) if i % 3 else (),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("full_sort_up_to", [10**6, 0], ids=["sorted", "selected"])
@pytest.mark.parametrize("query", ["latency", "latency alpha3", "latency on db", "svc004 latency", "nothing at all"])
def test_a_capped_match_lists_the_best_and_keeps_every_domain_and_term(query, full_sort_up_to, monkeypatch):
    """The same whether the cap sorts every candidate or selects the best without sorting (over FULL_SORT_UP_TO)."""
    monkeypatch.setattr(hints_module, "FULL_SORT_UP_TO", full_sort_up_to)
    index = L0Index(_crowd(240))
    full = index.match(query, max_matches=10_000)
    capped = index.match(query, max_matches=7)
    assert capped.matches == full.matches[:7]
    assert capped.match_count == len(full.matches)
    assert (capped.total_matches == -1) == (len(full.matches) <= 7)
    assert capped.domains == full.domains
    assert capped.matched_keywords == full.matched_keywords
    assert sorted(capped.entities) == sorted(full.entities)
    assert capped.to_dict()["total_matches"] == len(full.matches)


def test_default_cap_bounds_what_a_common_keyword_lists():
    hints = L0Index(_crowd(240)).match("latency")
    assert len(hints.matches) == MAX_MATCHES and hints.match_count == 240
    assert hints.matches[0].entry_id == "api/Svc000"  # ties broken by entry id, as uncapped
    assert set(hints.domains) == {"api", "db", "cache", "queue", "edge"}


# --- terms as written ----------------------------------------------------------------------------------------
def _key(text: str) -> str:
    return " ".join(content_tokens(text))


def test_matched_terms_are_the_query_s_own_words():
    """Every term L0 shows is the query's words that matched, as the query writes them, never another entry's
    text (once "etcdBackendQuotaLowSpace (title)" was shown for "etcd"); the match key beside it is the
    normalised form it was matched on."""
    corpus = load_corpus(REPO_ROOT / "sample_corpus")
    query = "PostgreSQL replication lag on the standby"
    hints = L0Index(corpus.entries).match(query)
    assert hints.matched_keywords
    for t in hints.matched_keywords:
        assert t.term in query, t
        assert _key(t.term) == t.key, t
    terms = {(t.term, t.key) for t in hints.matched_keywords}
    assert ("PostgreSQL replication", "postgr sql replication") in terms
    assert next(d for d in hints.to_dict()["matched_keywords"] if d["key"] == "postgr sql replication")["term"] == (
        "PostgreSQL replication"
    )


def test_a_term_inside_a_camel_case_word_is_shown_as_that_part_only():
    entries = [
        entry("etcd/etcdBackendQuotaLowSpace", "etcdBackendQuotaLowSpace", "etcd"),
        entry("etcd/etcdNoLeader", "etcd has no leader", "etcd", [], ["etcd"]),
        entry("alertmanager/AlertmanagerFailedToSendAlerts", "Alerts To Some Alertmanagers Failed", "alertmanager"),
        *ENTRIES[5:],
    ]
    index = L0Index(entries)
    hints = index.match("etcd cluster has no leader")
    assert {t.term for t in hints.matched_keywords} <= {"etcd", "etcd cluster has no leader", "leader"}
    assert all(t.term != "etcdBackendQuotaLowSpace" for m in hints.matches for t in m.terms)
    hints = index.match("Prometheus is failing to send alerts to Alertmanager")
    shown = {t.term for t in hints.matched_keywords} | {t.term for m in hints.matches for t in m.terms}
    assert "alerts to Alertmanager" in shown and all("Some" not in t for t in shown)
    assert index.match("etcdMembersDown and etcd").matched_keywords[0].term == "etcd"  # the first place, as written


def test_index_terms_are_written_as_the_entry_writes_them():
    entries = [
        entry(
            "databases/PostgresReplicationLag",
            "PostgreSQL replication lag is high",
            "databases",
            ["Streaming Replication"],
            ["pg_stat_replication"],
        ),
        *ENTRIES,
    ]
    terms = {(t["key"], t["field"]): t["term"] for t in L0Index(entries).index_terms("databases/PostgresReplicationLag")}
    assert terms[("postgr sql replication", "title")] == "PostgreSQL replication"
    assert terms[("sql replication", "title")] == "PostgreSQL replication"  # whole words: the word that holds "SQL"
    assert terms[("replication lag high", "title")] == "replication lag is high"  # the stopword kept, as written
    assert terms[("replication lag", "name")] == "ReplicationLag"  # CamelCase parts of the file name, as written
    assert terms[("streaming replication", "keyword")] == "Streaming Replication"
    assert terms[("pg stat replication", "entity")] == "pg_stat_replication"
    assert L0Index(entries).index_terms("no/SuchEntry") == []


def test_terms_as_written_leave_scores_and_matches_as_they_were():
    """The written form is display only: two corpora whose titles differ only in punctuation match every query
    with the same scores, match keys and shown terms (the query's words)."""
    punctuated = [
        Entry(e.entry_id, e.title.replace(" ", " -- ") + "!", e.domain, e.text, e.keywords, e.entities) for e in ENTRIES
    ]
    for q in ["Pods are crash looping again", "Disk full!", "etcd has no leader", "PostgreSQL cannot write", "kube node"]:
        a, b = L0Index(ENTRIES).match(q), L0Index(punctuated).match(q)
        assert [(m.entry_id, m.score) for m in a.matches] == [(m.entry_id, m.score) for m in b.matches], q
        assert a.matched_keywords == b.matched_keywords, q
        assert all(t.term in q for t in b.matched_keywords), q


def test_entry_count_per_domain_and_in_all():
    idx = L0Index(ENTRIES)
    assert idx.entry_count() == len(ENTRIES)
    assert idx.entry_count("kubernetes") == 2 and idx.entry_count("misc") == 20 and idx.entry_count("nowhere") == 0


# --- common terms ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["svc004 latency", "alpha3 latency", "Service 004 latency"])
def test_a_common_term_ranks_what_rarer_terms_bring_in(query):
    """A term over common_postings entries adds its weight to the entries other terms bring in: the best
    matches are the exact ones, and the hints name the common term with its entry count."""
    exact, capped = L0Index(_crowd(240)), L0Index(_crowd(240), common_postings=40)  # alpha3: 35 entries
    full, fast = exact.match(query, max_matches=10_000), capped.match(query, max_matches=10_000)
    assert fast.matches[0] == full.matches[0]
    best = [m for m in full.matches if m.score == full.matches[0].score]
    assert fast.matches[: len(best)] == tuple(best)
    assert {m.entry_id for m in fast.matches} <= {m.entry_id for m in full.matches}
    assert full.common_terms == () and "common_terms" not in full.to_dict()
    common = dict(fast.common_terms)
    assert common.get("latency") == 240 and all(n > 40 for n in common.values())
    assert fast.to_dict()["common_terms"][0] == {"key": "latency", "entries": 240}


def test_common_terms_alone_bring_in_their_first_entries_and_those_of_a_named_domain():
    capped = L0Index(_crowd(240), common_postings=20)
    hints = capped.match("latency", max_matches=10_000)
    assert hints.match_count == 20 and [m.entry_id for m in hints.matches][:2] == ["api/Svc000", "api/Svc005"]
    in_db = capped.match("latency on db", max_matches=10_000)
    assert in_db.domains[0] == "db"
    assert sum(m.domain == "db" for m in in_db.matches) == 20  # the first 20 of the named domain, not 4 of 20
    assert in_db.matches[0].entry_id == "db/Svc001"


def test_without_common_terms_the_hints_are_those_of_an_exact_count():
    """Below common_postings nothing changes: the same hints from an index whose cap no term reaches."""
    low, high = L0Index(_crowd(240), common_postings=240), L0Index(_crowd(240), common_postings=10**9)
    for q in ["latency", "latency alpha3", "latency on db", "svc004 latency", "Service 004 slow"]:
        assert low.match(q).to_dict() == high.match(q).to_dict(), q


def test_an_excluded_entry_is_matched_as_if_the_corpus_did_not_hold_it():
    idx = L0Index(ENTRIES)
    full = idx.match("disk full on the PostgreSQL primary")
    assert full.matches[0].entry_id == "databases/PostgresDiskFull" and "databases" in full.domains
    without = idx.match("disk full on the PostgreSQL primary", exclude="databases/PostgresDiskFull")
    assert "databases/PostgresDiskFull" not in {m.entry_id for m in without.matches}
    assert [m.entry_id for m in without.matches] == ["storage/VolumeDiskFull"]  # the sibling that remains
    assert without.domains == ("storage",)  # so the routing follows what the knowledge base would then hold
    # the one entry a query matches, excluded: no match at all, and an unknown id excludes nothing
    assert idx.match("etcd has no leader", exclude="etcd/etcdNoLeader").matches == ()
    assert idx.match("etcd has no leader", exclude="no/such").matches[0].entry_id == "etcd/etcdNoLeader"
