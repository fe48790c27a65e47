"""Fixtures of the Weaviate process's tests: chromium's browser and page (a stopped app must stop its server too)."""

from ..helpers.browser import browser, page  # noqa: F401
