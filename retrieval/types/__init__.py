"""The ground floor: the names every layer shares (modes, statuses, layers, the model catalogue, the DuckDB budget).

Its modules import nothing of the project but the error hierarchy (retrieval.errors, itself a leaf), and no service:
importing the core, which stands on this floor and on config, loads neither DuckDB, Weaviate nor onnxruntime.
"""
