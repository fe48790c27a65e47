"""Text normalisation shared by the L0 matcher: case, punctuation, CamelCase and simple plurals."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_TEMPLATE = re.compile(r"\{\{-?(.*?)-?\}\}", re.S)
_TEMPLATE_LABEL = re.compile(  # a label a template expression reads: its name is the word it stands for
    r"(?:\$labels|\.Labels|\$externalLabels|\.CommonLabels|\.GroupLabels)\.(\w+)" r'|index\s+\$labels\s+"(\w+)"'
)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# fmt: off
STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "been", "being", "but", "by", "can", "could", "did", "do", "does",
    "for", "from", "had", "has", "have", "having", "how", "i", "if", "in", "into", "is", "it", "its", "may", "might",
    "my", "no", "not", "of", "on", "or", "our", "should", "so", "some", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "too", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "why", "will", "with", "would", "you", "your",
])
# fmt: on


def split_camel(word: str) -> list[str]:
    """'KubePodCrashLooping' -> ['Kube', 'Pod', 'Crash', 'Looping']; 'etcdGRPCRequests' -> ['etcd', 'GRPC', 'Requests']."""
    parts = _CAMEL.findall(word)
    return parts if parts else [word]


def camel_parts(word: str) -> list[tuple[int, int]]:
    """The (start, end) of each CamelCase part of `word`, as split_camel cuts it; the whole word when it has none."""
    parts = [(m.start(), m.end()) for m in _CAMEL.finditer(word)]
    return parts if parts else [(0, len(word))]


def singular(token: str) -> str:
    """Fold a simple English plural into a match key (not a word for display): 'pods' -> 'pod', 'policies' -> 'policy',
    'caches' and 'cache' -> 'cach' (a final 'e' is dropped on words over four letters, so '-es' and '-s' agree)."""
    if len(token) <= 3 or not token.isalpha():
        return token
    if token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith(("xes", "ches", "shes", "sses", "zes")):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if len(token) > 4 and token.endswith("e"):
        token = token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Normalised tokens: NFKC, CamelCase split, lower case, punctuation dropped, plurals folded."""
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    for word in _WORD.findall(text):
        for part in split_camel(word):
            out.append(singular(part.lower()))
    return out


def normalise(text: str) -> str:
    """One space-separated string of `tokens(text)`."""
    return " ".join(tokens(text))


def without_templates(text: str) -> str:
    """An alerting rule's or notification's Go template expressions as the words they stand for: a label
    (`{{ $labels.namespace }}`, `{{ .Labels.pod }}`) becomes its name ("namespace"), anything else (`{{ $value }}`,
    `{{ printf "%.2f" $value }}`) goes; whitespace collapses. Text without "{{" comes back as it was."""
    if "{{" not in text:
        return text

    def words(m: re.Match[str]) -> str:
        label = _TEMPLATE_LABEL.search(m.group(1))
        return (label.group(1) or label.group(2)) if label else ""

    return " ".join(_TEMPLATE.sub(words, text).split())


def content_tokens(text: str) -> list[str]:
    """`tokens` without stopwords."""
    return [t for t in tokens(text) if t not in STOPWORDS]


@dataclass(frozen=True)
class Token:
    """One content token of a text and where it came from: `key` is what L0 compares; `start:end` is the
    CamelCase part it was made from and `word_start:word_end` the whole word, both in `Spans.text`."""

    key: str
    start: int
    end: int
    word_start: int
    word_end: int


@dataclass(frozen=True)
class Spans:
    """`content_tokens(text)` with their places in `text` (the NFKC form of the input, which is the input
    itself unless it holds full-width or compatibility characters)."""

    text: str
    tokens: tuple[Token, ...]

    def surface(self, first: int, last: int, *, whole_words: bool) -> str:
        """The text from token `first` to token `last` (inclusive) as written: whole words, or the CamelCase
        parts themselves."""
        a, b = self.tokens[first], self.tokens[last]
        return self.text[a.word_start : b.word_end] if whole_words else self.text[a.start : b.end]


def content_spans(text: str) -> Spans:
    """The tokens of `content_tokens(text)`, each with the place it came from (for showing terms as written)."""
    norm = unicodedata.normalize("NFKC", text)
    out: list[Token] = []
    for m in _WORD.finditer(norm):
        word, pos = m.group(0), 0
        for part in split_camel(word):
            at = word.index(part, pos)  # the parts are pieces of the word, in order
            pos = at + len(part)
            key = singular(part.lower())
            if key not in STOPWORDS:
                out.append(Token(key, m.start() + at, m.start() + pos, m.start(), m.end()))
    return Spans(norm, tuple(out))
