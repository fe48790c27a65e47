import hashlib
import os
import socket
import threading

import pytest
import weaviate

from retrieval.engine.build import PATCH_TAG, check_patched
from retrieval.engine.server import answers, binary_name, connect, embedded_binary
from retrieval.errors import L1Error, WeaviateSetupError

from ..conftest import free_port


def test_binary_name_is_what_the_client_looks_for():
    digest = hashlib.sha256(b"v1.38.11").hexdigest()
    assert binary_name("1.38.11") == f"weaviate-v1.38.11-{digest}"
    assert binary_name("v1.38.11") == binary_name("1.38.11")


def test_the_built_binary_is_in_place_and_patched(base_settings):
    binary = embedded_binary(base_settings)
    assert binary.is_file()
    assert binary.parent == base_settings.weaviate_bin_dir / PATCH_TAG  # never an unpatched build beside it
    check_patched(binary)


def test_a_running_embedded_server_is_reused(base_settings, weaviate_client):
    second = connect(base_settings)  # same port: connects to the running server instead of starting one
    try:
        assert second.is_ready()
        assert second.get_meta()["version"] == base_settings.weaviate_version
    finally:
        second.close()
    assert weaviate_client.is_ready()  # closing the second client did not stop the first's server


def test_dead_url_is_unavailable(base_settings):
    with pytest.raises(L1Error) as info:
        connect(base_settings.with_(weaviate_url=f"http://127.0.0.1:{free_port()}", l1_timeout_s=2))
    assert info.value.unavailable and "cannot reach" in str(info.value)


def test_bad_url_is_named(base_settings):
    with pytest.raises(L1Error, match="not an http"):
        connect(base_settings.with_(weaviate_url="ftp://example"))


def test_port_taken_by_something_else_is_reported(base_settings, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(WeaviateSetupError, match=rf"127\.0\.0\.1:{busy} is held by python[\d.]* \(pid {os.getpid()}\)"):
            connect(base_settings.with_(embedded_port=busy, embedded_grpc_port=free_port(), data_dir=tmp_path))


def test_missing_binary_says_how_to_build_it(base_settings, tmp_path):
    s = base_settings.with_(
        weaviate_bin_dir=tmp_path, embedded_port=free_port(), embedded_grpc_port=free_port(), data_dir=tmp_path
    )
    with pytest.raises(WeaviateSetupError, match=r"scripts/setup\.sh"):
        connect(s)


def test_a_failed_health_check_writes_nothing_to_stdout(base_settings, weaviate_client, capfd):
    """weaviate-client prints a failed is_live to stdout, where a `--json` answer or MCP's wire goes."""
    # The session's server over HTTP, a port with nothing behind it for gRPC: the check's gRPC ping fails.
    client = weaviate.connect_to_local(port=base_settings.embedded_port, grpc_port=free_port(), skip_init_checks=True)
    try:
        capfd.readouterr()
        assert client.is_live() is False
        assert capfd.readouterr().out, "the client no longer prints a failed check: this test shows nothing"

        def check_while_another_thread_answers() -> bool:  # say the CLI's --json answer, printed meanwhile
            other = threading.Thread(target=lambda: print("the answer", flush=True))
            other.start()
            other.join()
            return client.is_live()

        assert answers(check_while_another_thread_answers) is False
        out, err = capfd.readouterr()
        assert out == "the answer\n", f"stdout holds more or less than the other thread's answer: {out!r}"
        assert err, "the client's message should reach stderr"
    finally:
        client.close()
