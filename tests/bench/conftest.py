"""The bench's tests drive chromium too (the app's script runs): its browser fixture."""

from ..helpers.browser import browser  # noqa: F401
