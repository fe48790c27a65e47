"""The tuning lab: saved eval runs, run-to-run comparison, settings sweeps, judgments and replay.

The tool (`retrieval.core.lookup` and what it imports) never imports this package; the lab imports the tool.
"""
