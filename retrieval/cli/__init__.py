"""`python -m retrieval` and the `lookup-lab` script: the typer app (`app`, assembled in retrieval/cli/commands.py) and
`main`. One module per command group; nothing else in retrieval imports this package."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.cli.commands import app


def __getattr__(name: str) -> Any:
    """`app` is assembled on first use, so that `python -m retrieval serve` imports retrieval.cli.serve alone."""
    if name == "app":
        from retrieval.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Run the command line: the installed console script, or `python -m retrieval`."""
    import sys

    from retrieval.cli.commands import app
    from retrieval.engine.shutdown import exit_on_signals

    exit_on_signals()  # SIGTERM/SIGINT unwind the command, so the embedded server it started is stopped
    invoked = Path(sys.argv[0]).name if sys.argv else ""
    app(prog_name=invoked if invoked == "lookup-lab" else "python -m retrieval")


__all__ = ["app", "main"]
