"""The CLI's side of warm lookups (retrieval.serve.warm_client): where the keeper listens, which settings it answers
for, and what a caller gets back from a real Unix socket, answering or not."""

from __future__ import annotations

import importlib
import json
import shutil
import socketserver
import tempfile
import threading
from pathlib import Path

import pytest

from retrieval.errors import LookupLabError, QueryError
from retrieval.serve.warm_client import (
    KEEPER,
    MAX_SOCKET_PATH,
    NO_KEEPER,
    ask_keeper,
    settings_fingerprint,
    socket_path,
)


def test_the_keeper_module_is_the_one_that_serves_warm_lookups():
    module = importlib.import_module(KEEPER)
    assert hasattr(module, "serve_warm_lookups")


@pytest.fixture
def short_dir():
    """A folder with a short path (pytest's own can be too long for a Unix socket under xdist)."""
    path = Path(tempfile.mkdtemp(prefix="ll-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_socket_sits_beside_the_data_unless_that_path_is_too_long(base_settings, short_dir):
    short = base_settings.with_(data_dir=short_dir / "d")
    assert socket_path(short) == short.weaviate_data_dir / "lookups.sock"
    deep = base_settings.with_(data_dir=short_dir / ("x" * 120))
    far = socket_path(deep)
    assert far.parent != deep.weaviate_data_dir and len(str(far).encode()) <= MAX_SOCKET_PATH
    assert socket_path(deep) == far  # the same place each time, for the keeper and every caller
    assert socket_path(base_settings.with_(data_dir=short_dir / ("y" * 120))) != far


def test_the_fingerprint_leaves_out_the_session_tag_and_nothing_else(base_settings):
    fp = settings_fingerprint(base_settings)
    assert settings_fingerprint(base_settings.with_(session_tag="run-7")) == fp
    for change in ({"top_k": base_settings.top_k + 1}, {"vector_weight": 1.0}, {"corpus_dir": Path("/elsewhere")}):
        assert settings_fingerprint(base_settings.with_(**change)) != fp, change


def test_no_keeper_listening_is_a_refusal_not_an_error(base_settings, tmp_path):
    answer = ask_keeper(base_settings.with_(data_dir=tmp_path / "none"), "disk is full")
    assert answer.result is None and answer.refused == NO_KEEPER == "no standing server listens"


class _Replying(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.server.requests.append(json.loads(self.rfile.readline()))
        self.wfile.write(self.server.reply)


@pytest.fixture
def keeper_socket(base_settings, short_dir):
    """A real Unix socket at the settings' keeper path, answering each request with `server.reply`."""
    settings = base_settings.with_(data_dir=short_dir / "k")
    path = socket_path(settings)
    path.parent.mkdir(parents=True)
    server = socketserver.UnixStreamServer(str(path), _Replying)
    server.requests, server.reply = [], b""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield settings, server
    server.shutdown()
    server.server_close()


def test_a_result_comes_back_and_the_request_carries_the_settings_and_session(keeper_socket):
    settings, server = keeper_socket
    server.reply = json.dumps({"result": {"layer": "L0+L1"}}).encode() + b"\n"
    answer = ask_keeper(settings, "Vault is sealed", session_tag="run-3")
    assert answer.result == {"layer": "L0+L1"} and answer.refused is None
    (sent,) = server.requests
    assert (sent["query"], sent["session_tag"], sent["settings"]) == ("Vault is sealed", "run-3", settings_fingerprint(settings))


def test_a_refusal_and_a_garbled_reply_both_leave_the_lookup_to_the_caller(keeper_socket):
    settings, server = keeper_socket
    server.reply = b'{"refused": "the standing server was started with other settings"}\n'
    assert ask_keeper(settings, "q").refused == "the standing server was started with other settings"
    server.reply = b"not json\n"
    assert "sent no answer" in (ask_keeper(settings, "q").refused or "")


def test_an_error_of_the_lookup_is_raised_as_its_own_class(keeper_socket):
    settings, server = keeper_socket
    server.reply = b'{"error": "query is too long: 9000 characters", "kind": "QueryError"}\n'
    with pytest.raises(QueryError, match="too long: 9000"):
        ask_keeper(settings, "q")
    server.reply = b'{"error": "corpus.md: bad", "kind": "CorpusError"}\n'  # takes more than a message: the base class
    with pytest.raises(LookupLabError, match=r"corpus\.md: bad") as caught:
        ask_keeper(settings, "q")
    assert type(caught.value) is LookupLabError
    server.reply = b'{"error": "x", "kind": "SystemExit"}\n'  # never a class outside the hierarchy
    with pytest.raises(LookupLabError):
        ask_keeper(settings, "q")


def test_a_socket_file_nobody_listens_on_is_a_refusal(base_settings, short_dir):
    settings = base_settings.with_(data_dir=short_dir / "stale")
    path = socket_path(settings)
    path.parent.mkdir(parents=True)
    server = socketserver.UnixStreamServer(str(path), _Replying)
    server.server_close()  # the file stays, as after a keeper killed -9
    assert path.exists()
    assert "did not answer" in (ask_keeper(settings, "q").refused or "")
