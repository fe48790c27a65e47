"""The limits a query and a served call meet: the longest query the core takes, the most results a served lookup
returns, and the length of a result's excerpt. Here on the ground floor so that the MCP server states them before
the core is imported (its protocol modules import neither the core nor a service)."""

from __future__ import annotations

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 50
EXCERPT_CHARS = 280
