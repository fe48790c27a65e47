"""The knowledge store at the edge: the embedding model, Weaviate (embedded, remote or a local cluster), ingest and
index health.
"""
