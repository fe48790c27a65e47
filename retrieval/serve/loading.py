"""The services of a server, opening in the background: the protocol is answered at once (initialize,
tools/list), and a call that needs the services waits for them up to a limit, then gets a clear error."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from retrieval.errors import LookupLabError

if TYPE_CHECKING:
    from retrieval.serve.api import KnowledgeLookup

DEFAULT_WAIT_S = 30.0  # a tools/call that arrives while loading waits this long, then is told to call again


class StillLoading(LookupLabError):
    """The services are not open yet (or failed to open): the call is refused with the reason."""


class Loading:
    """Where the open KnowledgeLookup will be. `ready()` / `failed()` are called from the event loop."""

    def __init__(self, wait_s: float = DEFAULT_WAIT_S) -> None:
        self.wait_s = wait_s
        self.kb: KnowledgeLookup | None = None
        self.error: BaseException | None = None
        self._done: anyio.Event | None = None  # made by the first waiter (an Event needs a running event loop)

    @classmethod
    def of(cls, kb: KnowledgeLookup) -> Loading:
        """Services that are open already."""
        loading = cls()
        loading.ready(kb)
        return loading

    def ready(self, kb: KnowledgeLookup) -> None:
        self.kb = kb
        if self._done is not None:
            self._done.set()

    def failed(self, error: BaseException) -> None:
        self.error = error
        if self._done is not None:
            self._done.set()

    async def get(self) -> KnowledgeLookup:
        """The open services; waits for them at most `wait_s`. Raises StillLoading."""
        if self.kb is None and self.error is None:
            if self._done is None:
                self._done = anyio.Event()
            with anyio.move_on_after(self.wait_s):
                await self._done.wait()
        if self.kb is not None:
            return self.kb
        if self.error is not None:
            raise StillLoading(f"the server could not open its services: {type(self.error).__name__}: {self.error}")
        raise StillLoading(
            f"the server is still loading (the embedding model and Weaviate): waited {self.wait_s:g} s for them; "
            "call again in a few seconds"
        )
