"""lookup_knowledge as a Model Context Protocol server: the handlers of its tools (`lookup_knowledge`, `read_entry`) and
resources (`kb://entry/<entry_id>`), and their answers; a refused argument is an isError result, and the server goes on.
Tool schemas are in retrieval.serve.mcp_tools; transports, signals and authentication in retrieval.serve.serving.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from retrieval.errors import LookupLabError
from retrieval.serve.answer_brief import ENTRY_URI, answer_payload, text_of
from retrieval.serve.loading import Loading
from retrieval.serve.mcp_tools import (
    LOOKUP_INPUT,
    READ_INPUT,
    TOOLS,
    check_arguments,
    detail_argument,
    text_argument,
    top_k_argument,
)

if TYPE_CHECKING:
    from retrieval.records.read_log import ReadLog
    from retrieval.serve.api import KnowledgeLookup

log = logging.getLogger("retrieval.serve.mcp_server")

SERVER_NAME = "lookup-lab"
UNNAMED_CLIENT = "mcp-unnamed-client"
LIST_PAGE = 100
WORKERS = 8  # lookups running at once; the embedder and DuckDB spool serialise their own parts


def client_name(ctx: ServerRequestContext) -> str:
    """clientInfo.name from `initialize` (or from the request envelope on 2026-era connections)."""
    params = getattr(ctx.session, "client_params", None)
    name = getattr(getattr(params, "client_info", None), "name", None)
    if not isinstance(name, str):
        return UNNAMED_CLIENT
    name = "".join(ch if ch.isprintable() else " " for ch in name).strip()[:100]
    return name or UNNAMED_CLIENT


def entry_payload(kb: KnowledgeLookup, entry_id: str) -> dict[str, Any]:
    entry = kb.entry(entry_id)
    return {**entry.to_dict(), "text": entry.text, "uri": ENTRY_URI + entry.entry_id}


def _ok(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text_of(payload))], structured_content=payload)


def _refused(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def _services_or_protocol_error(loading: Loading) -> KnowledgeLookup:
    try:
        return await loading.get()
    except LookupLabError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None


class _Handlers:
    """The server's answers over one KnowledgeLookup, open or still opening (`loading`); tool work runs on threads."""

    def __init__(self, loading: Loading, limiter: anyio.CapacityLimiter, reads: ReadLog | None) -> None:
        self.loading, self.limiter, self.reads = loading, limiter, reads

    async def list_tools(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            if params.name == "lookup_knowledge":
                return await self._lookup(ctx, params)
            if params.name == "read_entry":
                return await self._read(ctx, params)
            return _refused(f"unknown tool {params.name!r}: this server has {', '.join(t.name for t in TOOLS)}")
        except LookupLabError as exc:
            return _refused(str(exc))
        except Exception as exc:
            log.exception("tool %s failed", params.name)
            return _refused(f"{params.name} failed inside the server: {type(exc).__name__}: {exc}")

    async def _lookup(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = check_arguments(params.name, params.arguments, LOOKUP_INPUT)
        query = text_argument(params.name, args, "query")
        top_k = top_k_argument(args.get("top_k"))
        detail = detail_argument(args)
        tag = client_name(ctx)
        kb = await self.loading.get()
        return await anyio.to_thread.run_sync(  # the answer is shaped off the event loop too; recorded in full either way
            lambda: _ok(answer_payload(kb.lookup(query, top_k, session_tag=tag), kb, detail)), limiter=self.limiter
        )

    async def _read(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = check_arguments(params.name, params.arguments, READ_INPUT)
        entry_id = text_argument(params.name, args, "entry_id")
        kb = await self.loading.get()
        started = time.perf_counter()
        payload = entry_payload(kb, entry_id)
        reads = self.reads
        if reads is not None:
            tag, seconds = client_name(ctx), time.perf_counter() - started
            await anyio.to_thread.run_sync(
                lambda: reads.record(kb.runtime.services.recorder, payload, tag, seconds), limiter=self.limiter
            )
        return _ok(payload)

    async def list_resources(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        entries = (await _services_or_protocol_error(self.loading)).entries()
        start = int(params.cursor) if params and params.cursor and params.cursor.isdigit() else 0
        page = entries[start : start + LIST_PAGE]
        more = start + LIST_PAGE < len(entries)
        resources = [
            types.Resource(
                uri=ENTRY_URI + e.entry_id,
                name=e.entry_id,
                title=e.title,
                mime_type="text/markdown",
                description=f"{e.domain}: {e.title}",
            )
            for e in page
        ]
        return types.ListResourcesResult(resources=resources, next_cursor=str(start + LIST_PAGE) if more else None)

    async def list_templates(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=ENTRY_URI + "{+entry_id}",
                    name="entry",
                    title="Knowledge base entry",
                    mime_type="text/markdown",
                    description="One entry of the knowledge base by its entry_id, e.g. from a lookup_knowledge result.",
                )
            ]
        )

    async def read_resource(self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if not uri.startswith(ENTRY_URI):
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri!r}: entries are {ENTRY_URI}<entry_id>")
        kb = await _services_or_protocol_error(self.loading)
        try:
            entry = kb.entry(uri[len(ENTRY_URI) :])
        except LookupLabError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data={"uri": uri}) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=entry.text, mime_type="text/markdown")]
        )


def build_server(services: KnowledgeLookup | Loading, *, workers: int = WORKERS, reads: ReadLog | None = None) -> Server:
    """The MCP server over one KnowledgeLookup (one model, one Weaviate connection), open or still opening
    (a Loading): initialize and tools/list never wait for it; a call waits for it up to the Loading's limit.
    `reads` records read_entry calls (None: not recorded)."""
    loading = services if isinstance(services, Loading) else Loading.of(services)
    handlers = _Handlers(loading, anyio.CapacityLimiter(workers), reads)
    server = Server(
        SERVER_NAME,
        version="1",
        title="Lookup Lab knowledge base",
        instructions="Call lookup_knowledge before answering questions about operations alerts and runbooks; "
        "read its first field, answer: trust the results only when it says a supported answer was found; read_entry "
        "gives the whole runbook.",
        get_tool_input_schema=lambda name: next((t.input_schema for t in TOOLS if t.name == name), None),
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_templates,
        on_read_resource=handlers.read_resource,
    )
    # The SDK's default middleware is an OpenTelemetry span per message, a no-op here (no exporter is ever set
    # up) that still cost ~0.1 ms a call.
    server.middleware = []
    return server
