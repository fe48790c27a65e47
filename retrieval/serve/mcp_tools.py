"""The MCP server's tools as a client sees them: `lookup_knowledge` and `read_entry`, their input and output
JSON schemas and descriptions, and the checks of a call's arguments against them (a refused argument is a
QueryError naming it). The handlers are retrieval.serve.mcp_server's."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from retrieval.errors import QueryError
from retrieval.serve.answer_brief import BRIEF, DETAILS
from retrieval.types.limits import EXCERPT_CHARS, MAX_QUERY_CHARS, MAX_TOP_K
from retrieval.types.modes import Layer, Source

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
        "detail": {
            "type": "string",
            "enum": list(DETAILS),
            "default": BRIEF,
            "description": "brief (default): the claim, each result with why it ranks there and an excerpt, the "
            "hints in brief, the reason. full: also the raw L0 matches and L1 lists, the support features and the timings.",
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
_NUMBER_OR_NULL = {"type": ["number", "null"]}
RESULT_ITEM = {
    "type": "object",
    "properties": {
        "entry_id": {"type": "string"},
        "title": {"type": "string"},
        "domain": {"type": "string"},
        "score": {"type": "number"},
        "source": {"type": "string", "enum": [str(s) for s in Source]},
        "why": {"type": "string", "description": "brief: the rank each signal gave it (vector, BM25F, L0)"},
        "excerpt": {"type": "string", "maxLength": 300, "description": "its best-matching chunk's text, else its opening"},
        "uri": {"type": "string", "description": "full: its resource, kb://entry/<entry_id>"},
        "l0_score": _NUMBER_OR_NULL,
        "l1_score": _NUMBER_OR_NULL,
        "lexical_score": _NUMBER_OR_NULL,
        "ranks": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["entry_id", "title", "domain", "score", "source", "excerpt"],
}
_STRINGS = {"type": "array", "items": {"type": "string"}}
LOOKUP_OUTPUT = {
    "type": "object",
    "properties": {
        "answer": {
            "type": "string",
            "enum": ["supported answer in the knowledge base", "no supported answer in the knowledge base"],
            "description": "read this first: 'supported answer in the knowledge base', or 'no supported answer in the "
            "knowledge base' (then the results are only the nearest entries)",
        },
        "relevance": {
            "type": "object",
            "properties": {
                "semantic_support": {"type": "boolean"},
                "level": {"type": "string", "enum": ["high", "medium", "low", "none"]},
                "estimate": {"type": "string", "description": "the estimated chance that the top result is right"},
            },
            "required": ["semantic_support", "level", "estimate"],
        },
        "results": {"type": "array", "items": RESULT_ITEM},
        "hints": {
            "type": "object",
            "description": "L0 hint data: domains, matched titles (brief: those not among the results), keywords "
            "(full: with the field each came from), entities",
            "properties": {"domains": _STRINGS, "matched_titles": _STRINGS, "entities": _STRINGS},
            "required": ["domains", "matched_titles", "entities"],
        },
        "reason": {"type": "string", "description": "why the answer says what it says"},
        "layer": {"type": "string", "enum": [str(x) for x in Layer], "description": "which layers answered"},
        "invocation_id": {"type": "string"},
        "detail": {"type": "string", "enum": list(DETAILS)},
        "l1": {"type": "object", "description": "full: L1's status, filter, and its vector and BM25F lists"},
        "timings_ms": {"type": "object", "additionalProperties": {"type": "number"}, "description": "full only"},
    },
    "required": ["answer", "relevance", "results", "hints", "reason", "layer", "invocation_id", "detail"],
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
            "knowledge base': the entries listed are only the nearest ones); relevance.semantic_support false means "
            "nothing in the base is semantically close, so do not rely on the results. Returns ranked entries "
            "(entry_id, title, domain, score, source: L0 keyword match, L1 semantic match or both, why: the rank each "
            f"signal gave it, an excerpt of its best-matching chunk of up to {EXCERPT_CHARS} characters; the entry is also "
            "the resource kb://entry/<entry_id>), "
            "the L0 keyword hints, the reason for the answer, the layer that answered and the invocation_id of the "
            "recorded call. detail 'full' adds the raw L0 matches and L1 lists, the support features and the timings. "
            "Read a whole entry with read_entry."
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


def detail_argument(arguments: dict[str, Any]) -> str:
    """The detail level asked for: brief (also when not given) or full; anything else is refused."""
    value = arguments.get("detail", BRIEF)
    if not isinstance(value, str) or value not in DETAILS:
        raise QueryError(f"detail must be {' or '.join(map(repr, DETAILS))}, got {type(value).__name__} {_short(value)}")
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
