"""The lookup's core: L0 hints, routing, the one retrieval pipeline, fusion and the support estimate. Pure: services
come in as arguments; it imports no store internals, no lab, no serving.
"""
