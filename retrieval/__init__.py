"""Lookup Lab's retrieval core: L0 hints, L1 semantic search in Weaviate, fallback and invocation records.

This package never imports streamlit; the app in app.py and pages/ is a thin shell around it.
"""
