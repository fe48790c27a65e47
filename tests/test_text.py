import pytest

from retrieval.text import content_tokens, normalise, singular, split_camel


@pytest.mark.parametrize(
    "word, parts",
    [
        ("KubePodCrashLooping", ["Kube", "Pod", "Crash", "Looping"]),
        ("etcdGRPCRequestsSlow", ["etcd", "GRPC", "Requests", "Slow"]),
        ("KubeAPIErrorBudgetBurn", ["Kube", "API", "Error", "Budget", "Burn"]),
        ("HPAMaxReplicasReached", ["HPA", "Max", "Replicas", "Reached"]),
        ("node", ["node"]),
    ],
)
def test_split_camel(word, parts):
    assert split_camel(word) == parts


@pytest.mark.parametrize(
    "plural, single",
    [("pods", "pod"), ("replicas", "replica"), ("policies", "policy"), ("caches", "cache"),
     ("patches", "patch"), ("boxes", "box"), ("nodes", "node"), ("notes", "note"), ("alerts", "alert")],
)
def test_plural_and_singular_meet(plural, single):
    assert singular(plural) == singular(single)


@pytest.mark.parametrize("word", ["status", "class", "analysis", "gas", "not", "dns"])
def test_words_that_are_not_plurals_stay(word):
    assert singular(word) == word


def test_normalise_folds_case_punctuation_camel_and_plurals():
    assert normalise("Pods are CRASH-looping!!") == "pod are crash looping"
    assert normalise("Certificates expire") == normalise("certificate expires")
    assert normalise("KubePodCrashLooping") == "kube pod crash looping"
    assert content_tokens("Why is the pod crash looping?") == ["pod", "crash", "looping"]
    assert normalise("ｐｏｄ") == "pod"  # NFKC folds full-width letters
