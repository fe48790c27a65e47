"""Asking a standing server's keeper (retrieval.serve.warm_lookups) for a lookup over its Unix socket: the CLI's quick
path. Without a keeper of the same settings the CLI opens everything itself. Imports only the standard library and the
settings, so a call the keeper answers never loads weaviate-client, onnxruntime or DuckDB.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

from retrieval import errors
from retrieval.config import Settings

KEEPER = "retrieval.serve.warm_lookups"  # the module `server start` runs as the keeper (python -m)
SOCKET_FILE = "lookups.sock"
MAX_SOCKET_PATH = 100  # bytes: AF_UNIX paths are cut at 108 on Linux (104 elsewhere)
CONNECT_TIMEOUT_S = 2.0
ANSWER_MARGIN_S = 120.0  # on top of the L1 timeout: a keeper still loading the model, a busy machine
PROTOCOL = 1
NO_KEEPER = "no standing server listens"
KEEPER_ANSWERED = "answered by: the standing server's keeper"  # what `lookup -v` says on stderr
HERE_ANSWERED = "answered by: this process"
CALL_SETTINGS = ("session_tag",)  # settings a call may choose for itself; the rest must be the keeper's


def socket_path(settings: Settings) -> Path:
    """Where the keeper of the settings' embedded data directory listens: beside the data, or, when that path is too
    long for a Unix socket, in the temporary folder under a name made from it."""
    beside = settings.weaviate_data_dir / SOCKET_FILE
    if len(str(beside).encode()) <= MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha256(str(settings.weaviate_data_dir.resolve()).encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"lookup-lab-{digest}.sock"


def settings_fingerprint(settings: Settings) -> str:
    """One digest of every setting a lookup's answer depends on (all but CALL_SETTINGS): a keeper answers a call
    only when its own settings give the same digest."""
    fields = {f.name: str(getattr(settings, f.name)) for f in dataclasses.fields(settings) if f.name not in CALL_SETTINGS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class WarmAnswer:
    """What the keeper said: the lookup's result as its JSON (`result`), or why it would not answer (`refused`)."""

    result: dict[str, Any] | None = None
    refused: str | None = None


def ask_keeper(settings: Settings, query: str, *, session_tag: str | None = None) -> WarmAnswer:
    """The standing keeper's lookup of `query` under `settings`, recorded by the keeper. `refused` says why it gave
    none (no keeper listens, other settings, a keeper gone mid-call): the caller then looks up on its own. An error
    the lookup itself raised (a refused query) is raised here as the same class of retrieval.errors."""
    path = socket_path(settings)
    if not path.exists():
        return WarmAnswer(refused=NO_KEEPER)
    request = {
        "protocol": PROTOCOL,
        "settings": settings_fingerprint(settings),
        "query": query,
        "session_tag": session_tag or settings.session_tag,
    }
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(CONNECT_TIMEOUT_S)
            conn.connect(str(path))
            conn.settimeout(settings.l1_timeout_s + ANSWER_MARGIN_S)
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = _read_line(conn)
    except OSError as exc:
        return WarmAnswer(refused=f"the standing server at {path} did not answer: {exc}")
    try:
        answer = json.loads(reply)
    except ValueError:
        return WarmAnswer(refused=f"the standing server at {path} sent no answer")
    if "error" in answer:
        kind = getattr(errors, str(answer.get("kind")), errors.LookupLabError)
        if not (isinstance(kind, type) and issubclass(kind, errors.LookupLabError)) or kind.__init__ is not Exception.__init__:
            kind = errors.LookupLabError  # only classes that take a message alone are raised as themselves
        raise kind(answer["error"])
    if isinstance(answer.get("result"), dict):
        return WarmAnswer(result=answer["result"])
    return WarmAnswer(refused=str(answer.get("refused") or "the standing server gave no result"))


def _read_line(conn: socket.socket) -> bytes:
    parts = []
    while True:
        part = conn.recv(1 << 16)
        if not part:
            break
        parts.append(part)
        if part.endswith(b"\n"):
            break
    return b"".join(parts)
