"""MCP's stdio transport over pipes, read and written by the event loop itself, which saves the SDK's `stdio_server`
three thread hops a call; stdin and stdout of any other kind fall back to the SDK's transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import orjson
from mcp.shared.message import SessionMessage

STDIO_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message a line
PARSE_ERROR = -32700


def stderr_log(message: str) -> None:
    """A line for the person running `serve`: stdout is the wire."""
    print(f"lookup-lab serve: {message}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def stdio_streams(first_sent: anyio.Event | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """MCP over this process's stdin and stdout: on the event loop when both are pipes or sockets, else the SDK's. While
    serving, fd 0 reads /dev/null and fd 1 writes to stderr, so stray output misses the wire. `first_sent` is set once
    the first message (the initialize reply) is written."""
    if not all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) for m in (os.fstat(0).st_mode, os.fstat(1).st_mode)):
        from mcp.server.stdio import stdio_server

        async with stdio_server() as streams:
            yield streams
        return
    saved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1)]  # restored on the way out
    wire_in, wire_out = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in saved)  # the pipes close these
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    pipes: list[asyncio.BaseTransport] = []
    try:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=STDIO_LINE_LIMIT)
        in_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), open(wire_in, "rb", 0))  # noqa: SIM115
        pipes.append(in_pipe)
        out_pipe, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, open(wire_out, "wb", 0))  # noqa: SIM115
        pipes.append(out_pipe)
        writer = asyncio.StreamWriter(out_pipe, flow, None, loop)
        incoming_w, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_r = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_lines() -> None:
            async with incoming_w:
                while line := await _read_line(reader):
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:
                        reply = parse_error_reply(line)
                        if reply is not None:  # not JSON at all: JSON-RPC's parse error, id null
                            writer.write(reply)
                            with contextlib.suppress(ConnectionError):
                                await writer.drain()
                        else:  # JSON but no JSON-RPC message: the session logs it and goes on
                            await incoming_w.send(exc)
                        stderr_log(f"a stdin line that is not a JSON-RPC message was refused: {_preview(line)}")
                        continue
                    await incoming_w.send(SessionMessage(message))

        async def write_lines() -> None:
            async with outgoing_r:
                async for sent in outgoing_r:
                    writer.write(sent.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                    with contextlib.suppress(ConnectionError):  # the host is gone: its stdin EOF stops us
                        await writer.drain()
                    if first_sent is not None:
                        first_sent.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            yield incoming, outgoing
            outgoing.close()  # the writer sends what it holds, then ends
    finally:
        for pipe in pipes:
            pipe.close()
        for fd, kept in enumerate(saved):
            with contextlib.suppress(OSError):
                os.set_blocking(kept, True)  # the pipe transports made the shared file description non-blocking
                os.dup2(kept, fd)
            os.close(kept)


def parse_error_reply(line: bytes) -> bytes | None:
    """The JSON-RPC reply to a line that is not JSON (-32700, id null), or None when it is JSON."""
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        error = {"code": PARSE_ERROR, "message": f"Parse error: the line is not JSON ({exc})"}
        return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error}) + b"\n"
    return None


def _preview(line: bytes, limit: int = 120) -> str:
    text = line.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    """The next line; b"" at the end of input. A line over STDIO_LINE_LIMIT is skipped, as a refused message."""
    while True:
        try:
            return await reader.readline()
        except ValueError:
            stderr_log(f"a stdio message over {STDIO_LINE_LIMIT} bytes was skipped")
