"""Lookup Lab's retrieval core: L0 hints, L1 semantic search in Weaviate, fallback and invocation records.

This package never imports streamlit; the app in app.py and pages/ is a thin shell around it.
"""

__all__ = ["open_lookup"]


def __getattr__(name: str):
    # Lazy, so that `import retrieval.x` does not load Weaviate, DuckDB and the services for every module.
    if name == "open_lookup":
        from retrieval.serve.api import open_lookup

        return open_lookup
    raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
