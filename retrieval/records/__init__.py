"""The invocation store: every lookup as a DuckDB row, its dashboard and read-only SQL, within a memory budget."""
