import pytest

from retrieval.core.text import content_spans, content_tokens, normalise, singular, split_camel, without_templates


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
    [
        ("pods", "pod"),
        ("replicas", "replica"),
        ("policies", "policy"),
        ("caches", "cache"),
        ("patches", "patch"),
        ("boxes", "box"),
        ("nodes", "node"),
        ("notes", "note"),
        ("alerts", "alert"),
    ],
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


@pytest.mark.parametrize(
    "text",
    [
        "PostgreSQL replication lag on the standby",
        "KubePodCrashLooping",
        "etcdGRPCRequestsSlow",
        "Pods are CRASH-looping!!",
        "ｐｏｄ restarts",
        "Größe über 2 GB",
        "caches_and patches",
        "",
        "the and of",
        "x509: certificate has expired",
        "Ceph OSD down (osd.3)",
        "HPAMaxReplicasReached",
        "naïve café ﬁle",
        "日本語 text 123abc",
    ],
)
def test_content_spans_give_the_content_tokens_with_their_places(text):
    spans = content_spans(text)
    assert [t.key for t in spans.tokens] == content_tokens(text)
    for t in spans.tokens:
        assert t.word_start <= t.start < t.end <= t.word_end
        assert content_tokens(spans.text[t.start : t.end]) == [t.key]


def test_surface_text_is_the_span_as_written():
    spans = content_spans("PostgreSQL replication lag on the standby")
    assert [t.key for t in spans.tokens] == ["postgr", "sql", "replication", "lag", "standby"]
    assert spans.surface(0, 2, whole_words=True) == "PostgreSQL replication"
    assert spans.surface(1, 2, whole_words=True) == "PostgreSQL replication"  # whole words: the word that holds "sql"
    assert spans.surface(1, 2, whole_words=False) == "SQL replication"
    assert spans.surface(3, 4, whole_words=True) == "lag on the standby"  # stopwords between stay, as written
    assert content_spans("KubePodCrashLooping").surface(1, 3, whole_words=False) == "PodCrashLooping"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "Configuration has failed to load for {{ $labels.namespace }}/{{ $labels.pod}}.",
            "Configuration has failed to load for namespace/pod.",
        ),
        ("failed to send {{ $value | humanizePercentage }} of notifications", "failed to send of notifications"),
        ('only {{ printf "%.2f" $value }}% space left on {{ $labels.device }}', "only % space left on device"),
        ('{{ .Labels.pod }} of {{ index $labels "job" }} ({{- $labels.instance -}})', "pod of job (instance)"),
        ("{{ $value }}", ""),
        ("Plain text {is} kept,  as   written", "Plain text {is} kept,  as   written"),  # no template: unchanged
    ],
)
def test_without_templates_writes_label_expressions_as_their_names_and_drops_the_rest(text, words):
    assert without_templates(text) == words
