"""Eval sets and evaluation: configurations as named pipelines, metrics, significance, routing figures and reports."""
