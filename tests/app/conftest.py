"""Fixtures of the app's tests: AppTest's (fresh caches, the navigation of a running server, the address it is served
on, the app pointed at the session's Weaviate) and chromium's (the browser and a page)."""

from ..helpers.app_fixtures import (  # noqa: F401
    app_env,
    fresh_caches,
    minilm_sample,
    navigation_like_a_running_server,
    served_on,
)
from ..helpers.browser import browser, page  # noqa: F401
