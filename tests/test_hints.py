import pytest

from retrieval.corpus import Entry
from retrieval.hints import MAX_MATCHES, L0Index


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
    assert {"pod crash looping", "crash looping"} <= {t.term for t in hints.matched_keywords}


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
    return [Entry(f"{domains[i % 5]}/Svc{i:03d}", f"Service {i:03d} slow", domains[i % 5], "body",
                  ("latency", f"alpha{i % 7}"), (f"svc{i:03d}",) if i % 3 else ()) for i in range(n)]


@pytest.mark.parametrize("query", ["latency", "latency alpha3", "latency on db", "svc004 latency", "nothing at all"])
def test_a_capped_match_lists_the_best_and_keeps_every_domain_and_term(query):
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
