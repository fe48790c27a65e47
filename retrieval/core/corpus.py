"""The knowledge corpus: markdown files with YAML frontmatter, read with python-frontmatter."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import frontmatter
import yaml

from retrieval.errors import CorpusError

MAX_FILE_BYTES = 2_000_000
KEYWORD_FIELDS = ("keywords", "tags", "aliases")


@dataclass(frozen=True)
class Entry:
    """One knowledge entry. `entry_id` is its path below the corpus root, without `.md`."""

    entry_id: str
    title: str
    domain: str
    text: str
    keywords: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        """The file stem, e.g. 'KubePodCrashLooping'."""
        return self.entry_id.rsplit("/", 1)[-1]

    @property
    def content_hash(self) -> str:
        """Changes whenever anything that is indexed changes."""
        payload = json.dumps([self.entry_id, self.title, self.domain, self.text, self.keywords, self.entities])
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "domain": self.domain,
            "keywords": list(self.keywords),
            "entities": list(self.entities),
        }


@dataclass(frozen=True)
class CorpusProblem:
    """A file that was skipped, and why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class Corpus:
    root: str
    entries: tuple[Entry, ...]
    problems: tuple[CorpusProblem, ...] = ()

    def by_id(self) -> dict[str, Entry]:
        return {e.entry_id: e for e in self.entries}

    @property
    def domains(self) -> list[str]:
        return sorted({e.domain for e in self.entries})

    @property
    def without_frontmatter(self) -> list[Entry]:
        """The entries whose file has no frontmatter fields: title from the first heading, domain from the folder."""
        return [e for e in self.entries if not e.metadata]


def _string_list(value: Any, path: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, list):
        raise CorpusError(path, f"expected a list of strings, got {type(value).__name__}", field=name)
    out = []
    for item in value:
        if isinstance(item, (dict, list)):
            raise CorpusError(path, f"expected a list of strings, found {type(item).__name__} {item!r}", field=name)
        if item is not None and str(item).strip():
            out.append(str(item).strip())
    return tuple(out)


def _frontmatter(text: str, path: str) -> tuple[dict[Any, Any], str]:
    """(fields, body). What frontmatter.loads does, except that a header which is not a mapping (a YAML
    list, string or number) is an error instead of silently dropped, and fields named `content` or
    `handler` are fields like any other (loads passes them as arguments to its Post and fails)."""
    text = text.strip()
    handler = frontmatter.detect_format(text, frontmatter.handlers)
    if handler is None:
        return {}, text
    try:
        header, body = handler.split(text)
    except ValueError:
        return {}, text
    fields = handler.load(header)
    if fields is None:
        return {}, body.strip()
    if not isinstance(fields, dict):
        raise CorpusError(
            path, f"frontmatter must be a mapping of fields (title: ..., tags: [...]), got a {type(fields).__name__}"
        )
    return dict(fields), body.strip()


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")


def first_heading(body: str) -> str:
    """The text of the body's first level-one `# Heading` outside code fences; "" when it has none."""
    fence = ""
    for line in body.splitlines():
        opened = _FENCE.match(line)
        if fence:
            fence = "" if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) else fence
        elif opened:
            fence = opened.group(1)
        elif found := _HEADING.match(line):
            return found.group(1).strip()
    return ""


def parse_entry(entry_id: str, raw: bytes, path: str, default_domain: str) -> Entry:
    """Build an Entry from a file's bytes. Raises CorpusError naming the file and field."""
    if len(raw) > MAX_FILE_BYTES:
        raise CorpusError(path, f"file is {len(raw)} bytes, over the {MAX_FILE_BYTES} byte limit")
    if b"\x00" in raw:
        raise CorpusError(path, "binary file (contains NUL bytes), not markdown")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(path, f"not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})") from exc
    if not text.strip():
        raise CorpusError(path, "file is empty")
    try:
        meta, body = _frontmatter(text, path)
    except CorpusError:
        raise
    except yaml.YAMLError as exc:
        raise CorpusError(path, f"frontmatter is not valid YAML: {' '.join(str(exc).split())}") from exc
    except Exception as exc:  # python-frontmatter raises plain ValueError/TypeError for odd headers
        raise CorpusError(path, f"frontmatter cannot be read: {exc}") from exc
    title = meta.get("title")
    if title is not None and not isinstance(title, (str, int, float)):
        raise CorpusError(path, f"expected a string, got {type(title).__name__}", field="title")
    domain_field = "domain" if "domain" in meta else "category"
    domain = meta.get(domain_field)
    if domain is not None and not isinstance(domain, str):
        raise CorpusError(path, f"expected a string, got {type(domain).__name__}", field=domain_field)
    keywords: list[str] = []
    for name in KEYWORD_FIELDS:
        keywords.extend(k for k in _string_list(meta.get(name), path, name) if k not in keywords)
    entities = _string_list(meta.get("entities"), path, "entities")
    title_text = str(title).strip() if title is not None else ""
    if not body and not title_text:
        raise CorpusError(path, "no title and no body: nothing to index")
    return Entry(
        entry_id=entry_id,
        title=title_text or first_heading(body) or entry_id.rsplit("/", 1)[-1],
        domain=(domain or "").strip() or default_domain,
        text=body,
        keywords=tuple(keywords),
        entities=entities,
        metadata={k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool, list))},
    )


def iter_markdown(root: Path) -> Iterable[Path]:
    return sorted(
        p for p in root.rglob("*.md") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def corpus_signature(root: Path | str) -> str:
    """A digest of the corpus files' paths, sizes and modification times: it changes when a file is added, removed
    or written, without reading any (a process that keeps a corpus loaded reads it again when this changes)."""
    root = Path(root)
    digest = hashlib.sha256()
    if root.is_dir():
        for path in iter_markdown(root):
            try:
                st = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def load_corpus(root: Path | str) -> Corpus:
    """Read every `*.md` below `root`. Bad files become problems; the rest still load."""
    root = Path(root)
    if not root.is_dir():
        raise CorpusError(str(root), "corpus folder does not exist")
    entries: list[Entry] = []
    problems: list[CorpusProblem] = []
    seen: dict[str, str] = {}
    for path in iter_markdown(root):
        rel = path.relative_to(root)
        entry_id = rel.with_suffix("").as_posix()
        default_domain = rel.parts[0] if len(rel.parts) > 1 else "general"
        try:
            entry = parse_entry(entry_id, path.read_bytes(), str(path), default_domain)
        except CorpusError as exc:
            problems.append(CorpusProblem(str(path), str(exc)))
            continue
        except OSError as exc:
            problems.append(CorpusProblem(str(path), f"{path}: cannot be read: {exc.strerror}"))
            continue
        key = entry_id.lower()
        if key in seen:
            problems.append(
                CorpusProblem(str(path), f"{path}: duplicate entry id '{entry_id}' (also {seen[key]}); kept the first")
            )
            continue
        seen[key] = str(path)
        entries.append(entry)
    return Corpus(root=str(root), entries=tuple(entries), problems=tuple(problems))


def open_folder(path: Path | str) -> Corpus:
    """A folder someone names as a new corpus, loaded. CorpusError naming the path when it is missing, not a
    folder, unreadable or holds no markdown file; files that fail to load are the corpus's problems."""
    text = str(path).strip()
    if not text:
        raise CorpusError("(no path)", "type the path of a folder of markdown files")
    root = Path(os.path.expanduser(text)).resolve()
    if not root.exists():
        raise CorpusError(str(root), "no such folder")
    if not root.is_dir():
        raise CorpusError(str(root), "is a file, not a folder")
    try:
        if not os.access(root, os.R_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
        next(root.iterdir(), None)
    except OSError as exc:
        raise CorpusError(str(root), f"the folder cannot be read: {exc.strerror or exc}") from exc
    corpus = load_corpus(root)
    if not corpus.entries and not corpus.problems:
        raise CorpusError(str(root), "holds no markdown (*.md) files, in it or in its subfolders")
    return corpus


def close_ids(entry_id: str, entries: Iterable[str], n: int = 3) -> tuple[str, ...]:
    """The ids nearest in spelling to one the corpus does not hold (for the error that names it), closest first: an id
    whose file name (without the domain folder) is the one given comes first, then those whose file names are close,
    then those close as whole ids (the shared domain folder alone does not make two ids close)."""
    ids = list(entries)
    tails: dict[str, list[str]] = {}
    for i in ids:
        tails.setdefault(i.rsplit("/", 1)[-1].lower(), []).append(i)
    tail = entry_id.rsplit("/", 1)[-1].lower()
    same_tail = tails.get(tail, [])
    near_tail = [i for t in difflib.get_close_matches(tail, list(tails), n=n, cutoff=0.6) for i in tails[t]]
    near = difflib.get_close_matches(entry_id, ids, n=n, cutoff=0.75)
    return tuple(dict.fromkeys(same_tail + near_tail + near))[:n]
