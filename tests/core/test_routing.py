import pytest

from retrieval.core.routing import category_filter, describe_routing


@pytest.mark.parametrize(
    "domains, expected",
    [
        ((), None),
        (("kubernetes",), "kubernetes"),
        (("kubernetes", "kubernetes"), "kubernetes"),
        (("kubernetes", "etcd"), None),
        (("", "  "), None),
        (("", "node"), "node"),
        ((" node ",), "node"),
        (("etcd", "", "etcd"), "etcd"),
        (("Node", "node"), None),  # categories are exact, case-sensitive values
    ],
)
def test_category_filter_table(domains, expected):
    assert category_filter(domains) == expected


def test_describe_routing_in_words():
    assert describe_routing(["kubernetes"]) == "one domain: kubernetes → L1 filtered on category = kubernetes"
    assert describe_routing(["etcd", "node"]) == "2 domains (etcd, node) → L1 unfiltered"
    assert describe_routing([]) == "no L0 domain → L1 unfiltered"
