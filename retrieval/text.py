"""Text normalisation shared by the L0 matcher: case, punctuation, CamelCase and simple plurals."""

from __future__ import annotations

import re
import unicodedata

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does for from had has have having how i if in
    into is it its may might my no not of on or our should so some than that the their them then there these
    they this those to too very was we were what when where which while who why will with would you your""".split()
)


def split_camel(word: str) -> list[str]:
    """'KubePodCrashLooping' -> ['Kube', 'Pod', 'Crash', 'Looping']; 'etcdGRPCRequests' -> ['etcd', 'GRPC', 'Requests']."""
    parts = _CAMEL.findall(word)
    return parts if parts else [word]


def singular(token: str) -> str:
    """Fold a simple English plural, so that a word and its plural meet: 'pods' and 'pod' -> 'pod',
    'policies' -> 'policy', 'caches' and 'cache' -> 'cach', 'patches' and 'patch' -> 'patch'.
    A final 'e' is dropped (after the plural) on words over four letters, which is what makes
    '-es' and '-s' plurals agree; the result is a match key, not a word for display."""
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


def content_tokens(text: str) -> list[str]:
    """`tokens` without stopwords."""
    return [t for t in tokens(text) if t not in STOPWORDS]
