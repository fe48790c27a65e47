"""Rendering helpers. User and corpus text never reaches the page as raw HTML or live Markdown:
`md()` escapes it for Markdown-rendering elements, `highlight_html()` escapes every piece it wraps."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from typing import Any

import streamlit as st

from retrieval.core.text import STOPWORDS, camel_parts, tokens
from retrieval.evals.settings_strip import strip_items

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$=^&\"'])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

UNEXPECTED = "Something went wrong on this page"  # the catch-all's message (tests look for it)
MARK_STYLE = "background-color: rgba(255, 164, 33, 0.35); padding: 0 2px; border-radius: 3px;"


def md(text: Any) -> str:
    """Text made inert for Markdown: every Markdown/directive character backslash-escaped, lines kept."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", "  \n")


def code(text: Any) -> str:
    """Text as an inline code span: shown exactly as written (backslash escapes are literal inside one), fenced
    with more backticks than it holds."""
    text = str(text).replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def match_keys(keys: Iterable[str]) -> set[str]:
    """The tokens of L0 match keys (`TermMatch.key`, already normalised: split, not normalised again)."""
    return {word for key in keys for word in key.split()}


def spans(text: str, keys: set[str]) -> list[tuple[str, bool]]:
    """`text` cut into (piece, matched) pieces: exactly what matched is marked, a CamelCase part at a time
    ("PrometheusRemoteWrite" of PrometheusRemoteWriteDesiredShards when the query said "prometheus remote write");
    a part is matched when its normalised token (lower case, plural folded) is among `keys`."""
    hits: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        for a, b in camel_parts(m.group(0)):
            token = tokens(m.group(0)[a:b])
            if token and token[0] not in STOPWORDS and token[0] in keys:
                start, end = m.start() + a, m.start() + b
                if hits and hits[-1][1] == start:  # a matched part right after another: one mark
                    hits[-1] = (hits[-1][0], end)
                else:
                    hits.append((start, end))
    out: list[tuple[str, bool]] = []
    pos = 0
    for start, end in hits:
        if start > pos:
            out.append((text[pos:start], False))
        out.append((text[start:end], True))
        pos = end
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def highlight_html(text: str, keys: set[str], *, tag: str = "span") -> str:
    """HTML for `text` with matched words in <mark>; every piece of text is html.escape'd."""
    parts = []
    for piece, hit in spans(text, keys):
        safe = html.escape(piece)
        parts.append(f'<mark style="{MARK_STYLE}">{safe}</mark>' if hit else safe)
    return f"<{tag}>{''.join(parts)}</{tag}>"


WRAP_STYLE = "overflow-wrap: anywhere;"  # a long CamelCase title breaks inside its card instead of overflowing it


def highlighted(text: str, keys: set[str]) -> None:
    st.html(highlight_html(text, keys, tag="div").replace("<div>", f'<div style="{WRAP_STYLE}">', 1))


def error(what: str, exc: BaseException | str, todo: str) -> None:
    """An error as a message: what failed, why, and what to do."""
    st.error(f"**{md(what)}**: {md(exc)}  \n{md(todo)}", icon=":material/error:")


def unexpected(exc: BaseException) -> None:
    st.error(
        f"{UNEXPECTED}: {md(type(exc).__name__)}: {md(exc)}  \nThe details are in the server log. "
        "Reload the page; if it keeps happening, use *Retry connection* in the sidebar or restart the app.",
        icon=":material/error:",
    )


def as_json(value: Any) -> Any:
    """A JSON-ready copy (timestamps and the like as text) for st.json."""
    return json.loads(json.dumps(value, default=str))


def rate(value: float | None) -> str:
    """A share as a percentage, or 'n/a' when it does not apply."""
    return "n/a" if value is None else f"{value:.0%}"


SCROLL_JS = """<script>(() => {{ /* run {nonce} */
  const started = Date.now();
  const go = () => {{
    const el = document.querySelector(".st-key-{key}");
    if (el) el.scrollIntoView({{block: "start", behavior: "instant"}});
    else if (Date.now() - started < 10000) requestAnimationFrame(go);
  }};
  go();
}})();</script>"""


def scroll_to(key: str, nonce: str) -> None:
    """Bring the container keyed `key` into view once (after a run the user clicked, whose results are below it)."""
    st.html(SCROLL_JS.format(key=key, nonce=html.escape(nonce)), unsafe_allow_javascript=True, width="content")


def settings_strip(settings: Any, *, label: str, key: str, note: str | None = None) -> None:
    """The settings that decide a run's ranking and support (retrieval.evals.settings_strip) as one line of
    `name=value` chips, in a container keyed `key` (tests find it by its st-key-… class), with `note` under it."""
    with st.container(key=key):
        st.markdown(f"**{md(label)}**: " + " ".join(f"`{name}={value}`" for name, value in strip_items(settings)))
        if note:
            st.caption(md(note))
