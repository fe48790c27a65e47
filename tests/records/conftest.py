"""Fixtures of the invocation store's tests: chromium's browser and page (the app is one of the store's writers)."""

from ..helpers.browser import browser, page  # noqa: F401
