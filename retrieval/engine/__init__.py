"""The Weaviate process: building the server from its Go module, starting and reaching it (embedded or by URL),
stopping it with the process that started it, a local cluster of several, and the nodes' health. The collections
and what goes into them are retrieval.store's."""
