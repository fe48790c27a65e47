"""What it would take: the smallest single-setting change that puts an entry first / into the top k, each run through
the runner against the session's real Weaviate and embedding model (the sample corpus). Every claimed rank is checked
by running the lookup under that change here."""

from __future__ import annotations

import dataclasses
import json

import pytest

from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge, search_text
from retrieval.core.protocols import LookupServices
from retrieval.core.remedies import DEPTH_VALUES, FILTER_OFF, Remedies, Tried, changes, what_it_would_take
from retrieval.core.runner import RunOptions, lookup_pipeline, run_pipeline
from retrieval.errors import EntryNotFound
from retrieval.records.invocations import InvocationStore
from retrieval.types.options import LookupOptions

FIRST = ("Vault sealed after the pod restarted, secrets unavailable for all apps.", "security/VaultSealed")
FILTERED = ("someone pushed an aws key to the public github repo", "security/SecretLeakedInRepository")  # L0: databases
LOST = ('Writes fail with "no space left on device" but df -h still shows 40% free.', "storage/InodeExhaustion")  # rank 2


@pytest.fixture(scope="module")
def services(sample_corpus, sample_store, embedder) -> LookupServices:
    return LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)


@pytest.fixture(scope="module")
def options(base_settings) -> LookupOptions:
    return base_settings.with_(collection="TestSample", top_k=5, candidate_depth=15, search_mode="fusion").options()


def rank_applied(tried: Tried, query: str, entry: str, services: LookupServices, options: LookupOptions) -> int | None:
    """The entry's rank in the top k when the change is made here: the filter off through the runner, any other
    setting with dataclasses.replace on the options and the lookup itself (None: outside its top k)."""
    change = tried.change
    if change.setting == FILTER_OFF:
        run = run_pipeline(search_text(query), lookup_pipeline(options), services, options, RunOptions(category=None))
        ids = [r.entry_id for r in run.results]
    else:
        changed = dataclasses.replace(options, **{change.setting: change.value})
        ids = [r.entry_id for r in lookup_knowledge(query, services, changed).results]
    return ids.index(entry) + 1 if entry in ids else None


def check_claims(rem: Remedies, query: str, entry: str, services: LookupServices, options: LookupOptions) -> None:
    for t in rem.tried:
        shown = t.rank if t.rank is not None and t.rank <= options.top_k else None
        assert rank_applied(t, query, entry, services, options) == shown, t.change.label


def test_the_changes_tried_smallest_first_none_of_them_the_current_value(options):
    tried = changes(options)
    sizes = [c.size for c in tried]
    assert sizes == sorted(sizes)
    assert {c.setting for c in tried} == {
        FILTER_OFF, "search_mode", "vector_weight", "lexical_weight", "l0_weight", "name_weight", "candidate_depth",
    }  # fmt: skip
    for c in tried:
        if c.setting != FILTER_OFF:
            assert getattr(options, c.setting) != c.value, c.label
    assert {c.value for c in tried if c.setting == "search_mode"} == {"near_vector", "hybrid"}
    depths = {c.value for c in tried if c.setting == "candidate_depth"}
    assert depths == {d for d in DEPTH_VALUES if d != 15 and d >= options.top_k}
    assert all(c.value >= 10 for c in changes(options.with_(top_k=10)) if c.setting == "candidate_depth")
    # a number's size is its change over the current value: 2.5 → 3.0 is smaller than 1 → 0
    size = {(c.setting, c.value): c.size for c in tried}
    assert size[("vector_weight", 3.0)] == pytest.approx(0.2) and size[("lexical_weight", 0.0)] == pytest.approx(1.0)
    assert size[("l0_weight", 0.25)] == pytest.approx(1.0)  # from 0: counted over 0.25


def test_an_entry_lost_in_the_fusion_is_put_first_by_the_smallest_change(services, options):
    query, entry = LOST
    rem = what_it_would_take(query, entry, services, options)
    result = lookup_knowledge(query, services, options)
    assert rem.rank == [r.entry_id for r in result.results].index(entry) + 1 == 2
    assert rem.first is not None and rem.first.rank == 1
    assert rem.into_top_k is None  # it is in the top 5 already
    # it is the smallest: the changes tried before it are the smaller ones, and none of them put the entry first
    assert rem.tried[-1] == rem.first
    assert [t.change for t in rem.tried] == changes(options)[: len(rem.tried)]
    assert all(t.rank != 1 for t in rem.tried[:-1])
    check_claims(rem, query, entry, services, options)
    changed = dataclasses.replace(options, **{rem.first.change.setting: rem.first.change.value})
    assert lookup_knowledge(query, services, changed).results[0].entry_id == entry
    assert rem.summary() == f"first: {rem.first.change.label} (rank 1)"


def test_an_entry_kept_out_by_the_filter_comes_back_with_the_filter_off(services, options):
    query, entry = FILTERED
    rem = what_it_would_take(query, entry, services, options)
    assert rem.rank is None
    filter_off = next(t for t in rem.tried if t.change.setting == FILTER_OFF)
    run = run_pipeline(search_text(query), lookup_pipeline(options), services, options, RunOptions(category=None))
    assert filter_off.rank == [r.entry_id for r in run.results].index(entry) + 1
    assert rem.into_top_k is not None and rem.into_top_k.rank is not None and rem.into_top_k.rank <= options.top_k
    assert rem.first is not None and rem.first.rank == 1
    assert rem.into_top_k.change.size <= rem.first.change.size
    smaller = [t for t in rem.tried if t.change.size < rem.into_top_k.change.size]
    assert all(t.rank is None or t.rank > options.top_k for t in smaller)
    check_claims(rem, query, entry, services, options)
    assert "into the top 5: " in rem.summary() and rem.summary().startswith("first: ")


def test_an_entry_already_first_needs_no_change(services, options):
    query, entry = FIRST
    rem = what_it_would_take(query, entry, services, options)
    assert lookup_knowledge(query, services, options).results[0].entry_id == entry
    assert rem.rank == 1 and rem.first is None and rem.into_top_k is None and rem.tried == ()
    assert rem.summary() == "first already: no change needed"


def test_an_unknown_id_raises_entry_not_found_naming_a_close_id(services, options):
    with pytest.raises(EntryNotFound, match="did you mean storage/InodeExhaustion") as caught:
        what_it_would_take(LOST[0], "storage/InodeExhaustio", services, options)
    assert caught.value.close[0] == "storage/InodeExhaustion"


def test_remedies_record_nothing_and_go_through_json(sample_corpus, sample_store, embedder, db_path, options):
    recorder = InvocationStore(db_path)
    try:
        services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, recorder)
        rem = what_it_would_take(LOST[0], LOST[1], services, options)
        recorder.flush()
        assert recorder.count() == 0
    finally:
        recorder.close()
    data = json.loads(json.dumps(rem.to_dict()))
    assert data == rem.to_dict()
    assert data["rank"] == 2 and data["first"]["rank"] == 1 and data["into_top_k"] is None
    assert len(data["tried"]) == len(rem.tried) and data["summary"] == rem.summary()
    assert rem.first is not None and data["first"]["setting"] == rem.first.change.setting
