"""Collection names that clash by case or that Weaviate refuses, against the session's real Weaviate."""

from __future__ import annotations

import pytest
from weaviate.classes.config import DataType, Property

from retrieval.errors import ConfigError
from retrieval.store import indexing
from retrieval.store.collection_names import clash
from retrieval.store.weaviate_store import KnowledgeStore


@pytest.mark.parametrize(
    ("wanted", "existing", "found"),
    [
        (["KbLoad"], ["KbLoad"], None),
        (["Kbload"], ["KbLoad"], ("Kbload", "KbLoad")),
        (["Kbload", "Kbload_Support"], ["Other", "KbLoad_Support"], ("Kbload_Support", "KbLoad_Support")),
        (["KbLoadX"], ["KbLoad"], None),
        ([], ["KbLoad"], None),
    ],
)
def test_clash_is_a_name_equal_but_for_case(wanted, existing, found):
    assert clash(wanted, existing) == found


def test_ingest_beside_a_collection_of_another_case_writes_nothing(weaviate_client, sample_store, sample_corpus, embedder):
    before = set(weaviate_client.collections.list_all(simple=True))
    with pytest.raises(ConfigError, match=r"'Testsample' differs from the existing collection 'TestSample'.*LOOKUP_COLLECTION"):
        indexing.ingest(KnowledgeStore(weaviate_client, "Testsample"), sample_corpus, embedder)
    assert set(weaviate_client.collections.list_all(simple=True)) == before


def test_a_support_fit_of_another_case_is_a_clash_too(weaviate_client, sample_corpus, embedder):
    weaviate_client.collections.create("ClashFit_support", properties=[Property(name="key", data_type=DataType.TEXT)])
    try:
        store = KnowledgeStore(weaviate_client, "ClashFit")
        with pytest.raises(ConfigError, match=r"'ClashFit_Support' differs from the existing collection 'ClashFit_support'"):
            indexing.ingest(store, sample_corpus, embedder)
        assert not weaviate_client.collections.exists("ClashFit")
        with pytest.raises(ConfigError, match="ClashFit_support"):
            store.drop()  # a rebuild deletes nothing either
        assert weaviate_client.collections.exists("ClashFit_support")
    finally:
        weaviate_client.collections.delete("ClashFit_support")


def test_a_name_weaviate_refuses_is_refused_first(weaviate_client, sample_corpus, embedder):
    with pytest.raises(ConfigError, match=r"'kb-load' must start with a capital letter.*LOOKUP_COLLECTION"):
        indexing.ingest(KnowledgeStore(weaviate_client, "kb-load"), sample_corpus, embedder)
