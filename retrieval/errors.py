"""The one error hierarchy of Lookup Lab. Every error names the file, field or value at fault."""

from __future__ import annotations


class LookupLabError(Exception):
    """Base class: everything the core raises on purpose."""


class ConfigError(LookupLabError):
    """A setting is missing or has a value we cannot use."""


class CorpusError(LookupLabError):
    """A knowledge-base file cannot be read; names the file and the reason."""

    def __init__(self, path: str, reason: str, field: str | None = None) -> None:
        self.path, self.reason, self.field = path, reason, field
        where = f"{path} (field '{field}')" if field else path
        super().__init__(f"{where}: {reason}")


class QueryError(LookupLabError):
    """A query was refused before any retrieval ran."""


class EvalSetError(LookupLabError):
    """An eval set file is malformed; names the file, case and field."""


class L1Error(LookupLabError):
    """Semantic retrieval (Weaviate) failed or is unreachable."""

    def __init__(self, message: str, *, unavailable: bool = False) -> None:
        self.unavailable = unavailable
        super().__init__(message)


class WeaviateSetupError(LookupLabError):
    """The Weaviate server could not be found, built or started."""


class StoreError(LookupLabError):
    """The invocation store (DuckDB) could not be read or written."""


class TrafficError(LookupLabError):
    """Recorded traffic cannot be read as asked: an empty window, an unknown session tag, an eval set of another
    corpus, a store with no calls; names the value."""


class SqlRefused(LookupLabError):
    """A statement given to the read-only SQL console was refused."""


class EntryNotFound(LookupLabError):
    """An entry id that is not in the loaded corpus."""

    def __init__(self, entry_id: str, known: int, close: tuple[str, ...] = ()) -> None:
        self.entry_id = entry_id
        self.close = close
        near = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(
            f"entry_id {entry_id!r} is not in the corpus ({known} entries): pass an entry_id from a lookup_knowledge result{near}"
        )


class ServeError(LookupLabError):
    """The MCP server could not start: address in use, or a bind that needs a token and has none."""


class RunNotFound(LookupLabError):
    """A saved eval run id that is not in the run store."""

    def __init__(self, run_id: str, known: int, db_path: object) -> None:
        self.run_id = run_id
        super().__init__(
            f"run_id {run_id!r} is not a saved run in {db_path} ({known} runs saved): `python -m retrieval runs` lists them"
        )


class ModelError(ConfigError):
    """An embedding model is unknown, or its files are not installed; names the model and its artifact."""


class BenchStopped(LookupLabError):
    """A bench size stopped before it could finish on this machine (its Weaviate outgrew the memory share)."""


class ScriptRunError(LookupLabError):
    """A page of the app started or ended no script run after an action (retrieval.bench.script_runs); says what
    the page showed."""
