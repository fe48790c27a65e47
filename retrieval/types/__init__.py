"""The ground floor: the names every layer shares (modes, statuses, layers, the model catalogue, the DuckDB budget).
Its modules import nothing of the project but retrieval.errors, so importing the core loads no DuckDB, Weaviate or
onnxruntime.
"""
