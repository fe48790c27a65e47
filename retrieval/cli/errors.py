"""The command line's one error handler: a LookupLabError (or another expected failure a command names) becomes one
line `error: ...` on stderr and exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from retrieval.errors import LookupLabError

USAGE_ERROR = 2  # the exit code of a refused or failed command (1 is kept for a failed gate or an unhealthy status)


def fail(message: object) -> NoReturn:
    """Say `error: message` on stderr and leave with exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(USAGE_ERROR)


@contextmanager
def reported(*also: type[Exception]) -> Iterator[None]:
    """Run the block; a LookupLabError, or an exception of the types in `also`, ends the command through `fail`."""
    caught: tuple[type[Exception], ...] = (LookupLabError, *also)
    try:
        yield
    except caught as exc:
        fail(exc)
