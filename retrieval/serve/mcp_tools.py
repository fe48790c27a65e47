"""The MCP server's tools as a client sees them: `lookup_knowledge` and `read_entry`, their input and output
JSON schemas and descriptions, and the checks of a call's arguments against them (a refused argument is a
QueryError naming it). The handlers are retrieval.serve.mcp_server's."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from retrieval.errors import QueryError
from retrieval.types.limits import EXCERPT_CHARS, MAX_QUERY_CHARS, MAX_TOP_K

ENTRY_URI = "kb://entry/"

LOOKUP_INPUT = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "A question, an alert summary or keywords, in plain text.",
        },
        "top_k": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TOP_K,
            "description": "How many entries to return (default: the server's top_k setting).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
READ_INPUT = {
    "type": "object",
    "properties": {"entry_id": {"type": "string", "description": "An entry_id from a lookup_knowledge result."}},
    "required": ["entry_id"],
    "additionalProperties": False,
}
LOOKUP_OUTPUT = {
    "type": "object",
    "properties": {
        "answer": {
            "type": "string",
            "description": "read this first: 'supported answer in the knowledge base', or 'no supported answer in the "
            "knowledge base' (then the results are only the nearest entries)",
        },
        "invocation_id": {"type": "string"},
        "layer": {"type": "string", "description": "L0+L1, L0, L1 or none: which layers answered"},
        "results": {"type": "array", "items": {"type": "object", "required": ["entry_id", "title", "domain", "score", "source"]}},
        "relevance": {"type": "object", "required": ["semantic_support", "level", "reason"]},
        "hints": {"type": "object", "description": "L0 hint data: matched titles, keywords (with field), domains, entities"},
    },
    "required": ["answer", "invocation_id", "layer", "results", "relevance", "hints"],
}
ENTRY_OUTPUT = {
    "type": "object",
    "properties": {"entry_id": {"type": "string"}, "text": {"type": "string"}},
    "required": ["entry_id", "title", "domain", "text"],
}

# Both tools only read, answer the same to the same call, and reach nothing outside the knowledge base.
READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
TOOLS = [
    types.Tool(
        name="lookup_knowledge",
        title="Look up the knowledge base",
        input_schema=LOOKUP_INPUT,
        output_schema=LOOKUP_OUTPUT,
        annotations=READ_ONLY,
        description=(
            "Search the operations knowledge base (runbooks) for entries that answer a question or an alert. "
            "Its first field, answer, says whether the base holds a supported answer ('no supported answer in the "
            "knowledge base': the entries listed are only the nearest ones). Returns ranked entries (entry_id, title, "
            "domain, score, source: L0 keyword match, L1 semantic match or "
            f"both, and an excerpt of up to {EXCERPT_CHARS} characters), a relevance assessment (semantic_support: "
            "false means nothing in the base is semantically close, so do not rely on the results), the layer "
            "that answered, the L0 keyword hints and the invocation_id of the recorded call. Read a whole entry with read_entry."
        ),
    ),
    types.Tool(
        name="read_entry",
        title="Read a knowledge base entry",
        input_schema=READ_INPUT,
        output_schema=ENTRY_OUTPUT,
        annotations=READ_ONLY,
        description="The whole text of one knowledge base entry (markdown), with its title, domain, keywords and entities.",
    ),
]


def text_argument(tool: str, arguments: dict[str, Any], name: str) -> str:
    value = arguments[name]
    if not isinstance(value, str):
        raise QueryError(f"{name} must be a string, got {type(value).__name__} {_short(value)}")
    return value


def top_k_argument(value: Any) -> Any:
    """top_k as JSON Schema's `integer` reads it: 2.0 is the integer 2. Anything else is left to check_top_k."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_arguments(tool: str, arguments: dict[str, Any] | None, schema: dict[str, Any]) -> dict[str, Any]:
    args = dict(arguments or {})
    allowed = list(schema["properties"])
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise QueryError(f"unknown argument {', '.join(map(repr, unknown))}: {tool} takes {', '.join(allowed)}")
    for name in schema["required"]:
        if name not in args:
            raise QueryError(f"the argument {name!r} is required ({tool} takes {', '.join(allowed)})")
    return args


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
