"""The MCP server's pure parts, without a server: the limits it states, excerpts, top_k, parse errors, loading."""

from __future__ import annotations

import anyio
import orjson
import pytest

from retrieval.core import lookup
from retrieval.serve import api, mcp_tools
from retrieval.serve.answer_brief import chunk_excerpt
from retrieval.serve.loading import Loading, StillLoading
from retrieval.serve.mcp_tools import top_k_argument
from retrieval.serve.stdio_transport import parse_error_reply


def test_the_limits_the_protocol_states_are_the_cores():
    """Imported from the ground floor, not restated: the tools, the core and the API read the same names."""
    from retrieval.types import limits

    assert mcp_tools.MAX_QUERY_CHARS is limits.MAX_QUERY_CHARS and lookup.MAX_QUERY_CHARS is limits.MAX_QUERY_CHARS
    assert mcp_tools.MAX_TOP_K is api.MAX_TOP_K is limits.MAX_TOP_K
    assert mcp_tools.EXCERPT_CHARS is api.EXCERPT_CHARS is limits.EXCERPT_CHARS


@pytest.mark.parametrize(
    "value, expected",
    [(2.0, 2), (2, 2), (50.0, 50), (2.5, 2.5), ("3", "3"), (True, True), (None, None), (0.0, 0)],
)
def test_top_k_reads_an_integral_float_as_its_integer(value, expected):
    got = top_k_argument(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "text, index, expected",
    [
        ("Kube Pod Crash Looping", 0, ""),  # the heading card: the entry's opening is shown instead
        ("Pod is stuck in CrashLoopBackOff (Kube Pod Crash Looping)\n## Diagnosis\nCheck the logs.", 2, "Check the logs."),
        ("Title\nFirst line of the body\nand its second.", 1, "First line of the body and its second."),
        ("Title only", 3, ""),
    ],
)
def test_a_chunk_excerpt_is_the_chunks_own_text_without_the_title_line(text, index, expected):
    assert chunk_excerpt(text, index) == expected


def test_a_long_chunk_excerpt_is_cut_at_a_word():
    got = chunk_excerpt("Title\n" + "word " * 200, 1)
    assert got.endswith("…") and len(got) <= mcp_tools.EXCERPT_CHARS + 1 and "Title" not in got


def test_a_line_that_is_not_json_gets_a_parse_error_with_id_null():
    reply = orjson.loads(parse_error_reply(b"{this is not json\n"))
    assert reply["jsonrpc"] == "2.0" and reply["id"] is None and reply["error"]["code"] == -32700
    assert "not JSON" in reply["error"]["message"]
    assert parse_error_reply(b'{"jsonrpc": "2.0", "method": 5}') is None  # JSON: not a parse error


def test_a_call_waits_for_loading_up_to_the_limit_then_is_told_the_server_is_still_loading():
    async def main():
        loading = Loading(wait_s=0.05)
        with pytest.raises(StillLoading, match=r"still loading .* waited 0\.05 s"):
            await loading.get()
        kb = object()

        async def finish():
            await anyio.sleep(0.01)
            loading.ready(kb)  # type: ignore[arg-type]

        slow = Loading(wait_s=30)
        async with anyio.create_task_group() as tg:
            tg.start_soon(finish)
            loading = slow
            assert await slow.get() is kb
        broken = Loading(wait_s=30)
        broken.failed(RuntimeError("no model"))
        with pytest.raises(StillLoading, match="could not open its services: RuntimeError: no model"):
            await broken.get()

    anyio.run(main)


def test_the_protocol_modules_do_not_import_the_core():
    """initialize is answered before Weaviate's client, pandas and the model runtime are imported."""
    import subprocess
    import sys

    code = (
        "import sys, retrieval.cli.serve, retrieval.serve.serving, retrieval.serve.mcp_server, retrieval.serve.mcp_tools,"
        " retrieval.serve.http_transport, retrieval.serve.stdio_transport, retrieval.config;"
        "print(sorted(m for m in ('weaviate', 'pandas', 'onnxruntime', 'retrieval.core.lookup', 'retrieval.serve.api') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
