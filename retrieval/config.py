"""Settings: defaults, then a YAML file, then LOOKUP_* environment variables (highest wins)."""

from __future__ import annotations

import dataclasses
import os
import re
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import ConfigError
from retrieval.types.budget import DEFAULT_MEMORY_LIMIT, DEFAULT_THREADS, DbBudget
from retrieval.types.models import DEFAULT_MODEL, spec_of
from retrieval.types.modes import Consistency, LookupMode, MissingScore, VectorCompression, values
from retrieval.types.options import OPTION_FIELDS, LookupOptions

REPO_ROOT = Path(__file__).resolve().parent.parent
# A repository checkout keeps the sample corpus and its data beside the code. An installed wheel (REPO_ROOT is then
# site-packages) reads the sample corpus it installed as data files (<prefix>/share/lookup-lab/, pyproject.toml)
# and keeps its data in the user's data folder, whatever the current directory.
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file()


def _installed_sample_corpus() -> Path:
    """<data path>/share/lookup-lab/sample_corpus of this interpreter's install scheme, or of its --user scheme."""
    schemes = (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user"))
    found = [Path(sysconfig.get_path("data", scheme)) / "share" / "lookup-lab" / "sample_corpus" for scheme in schemes]
    return next((path for path in found if path.is_dir()), found[0])


def _user_data_dir() -> Path:
    """$XDG_DATA_HOME/lookup-lab, by default ~/.local/share/lookup-lab."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "lookup-lab"


DEFAULT_CORPUS_DIR = REPO_ROOT / "sample_corpus" if IN_CHECKOUT else _installed_sample_corpus()
DEFAULT_DATA_DIR = REPO_ROOT / ".lookup-lab" if IN_CHECKOUT else _user_data_dir()
WEAVIATE_VERSION = "1.38.11"
# Settings whose values are one of an enum's (retrieval.types.modes) are parsed from their text in __post_init__:
# search_mode (fusion: a near_vector and a BM25F query, fused with L0 in the lookup; near_vector: vector and L0 only;
# hybrid: Weaviate's own hybrid query, fused with L0), missing_score (what the fusion counts for an entry an L1 list
# did not return), vector_compression (the quantizer; figures in docs/benchmarks.md) and consistency (Weaviate's).
DEFAULT_VECTOR_COMPRESSION = VectorCompression.RQ
MAX_CANDIDATE_DEPTH = 200


@dataclass(frozen=True)
class Settings:
    corpus_dir: Path = DEFAULT_CORPUS_DIR
    data_dir: Path = DEFAULT_DATA_DIR
    db_path: Path | None = None  # default: <data_dir>/invocations.duckdb
    judgments_dir: Path | None = None  # eval sets judged in the app; default: judged-eval-sets/ beside the invocation db
    weaviate_url: str | None = None  # None: embedded server
    weaviate_api_key: str | None = dataclasses.field(default=None, repr=False)
    remote_grpc_port: int | None = None  # with weaviate_url; default 50051 (443 for https)
    weaviate_version: str = WEAVIATE_VERSION
    weaviate_bin_dir: Path = Path.home() / ".cache" / "lookup-lab" / "weaviate"
    embedded_port: int = 8079
    embedded_grpc_port: int = 50050
    # The port whose data directory and node name the embedded server keeps, when it serves on another one because that
    # one is another process's (engine.server.place). None: embedded_port.
    home_port: int | None = None
    collection: str = ""  # "" -> derived from the corpus folder and the model: Kb_<folder>_<model slug>
    embedding_model: str = DEFAULT_MODEL  # one of models.MODELS; each model has its own collection
    model_dir: Path | None = None  # a folder holding the model's ONNX and tokenizer files, instead of the cache
    l1_enabled: bool = True
    search_mode: LookupMode = LookupMode.FUSION
    hybrid_alpha: float = 0.5
    top_k: int = 5
    candidate_depth: int = 15  # candidates each L1 query returns for the fusion (at least top_k); chosen by CV, docs/quality.md
    l1_timeout_s: float = 10.0
    app_l1_wait_s: float = 2.0  # the app's frame waits this long for a running or remote Weaviate (never for a cold start)
    vector_weight: float = 2.5  # with bge-small: chosen by 5x5-fold CV on the shared answerable sets (docs/quality.md)
    lexical_weight: float = 1.0
    l0_weight: float = 0.0
    name_weight: float = 2.0  # added for an entry the query names in full (whole title or file name); CV, README
    missing_score: MissingScore = MissingScore.BM25_LAST  # what an entry counts for an L1 list that did not return it
    support_threshold: float | None = None  # the support estimate that claims support. None: the model's, fitted by CV
    session_tag: str = "default"
    read_only: bool | None = None  # the app: no ingest, re-index or reload. None: read-only when it binds beyond loopback
    read_only_records: bool = False  # a read-only app records the lookups typed on Lookup (default: a demo leaves no trace)
    replication_factor: int | None = None  # copies of each shard, set when the collection is created. None: Weaviate's (1)
    shards: int | None = None  # shards of a new collection. None: Weaviate's default (one per node)
    consistency: Consistency | None = None  # ONE | QUORUM | ALL for queries and ingest. None: Weaviate's default (QUORUM)
    db_memory_limit: str = DEFAULT_MEMORY_LIMIT  # every DuckDB connection's memory_limit (db_budget), e.g. 1GB, 512MB
    db_threads: int = DEFAULT_THREADS  # every DuckDB connection's threads
    vector_compression: VectorCompression = DEFAULT_VECTOR_COMPRESSION  # none | rq | pq | bq | sq: the quantizer

    def __post_init__(self) -> None:
        object.__setattr__(self, "embedding_model", spec_of(self.embedding_model).name)
        if not self.collection:
            object.__setattr__(self, "collection", collection_for(self.corpus_dir, self.embedding_model))
        if not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", self.collection):
            raise ConfigError(
                f"collection: '{self.collection}' must start with a capital letter and hold only letters, digits and _ "
                "(change LOOKUP_COLLECTION or collection: in lookup.yaml)"
            )
        object.__setattr__(self, "search_mode", _one_of(LookupMode, self.search_mode, "search_mode"))
        if not 0.0 <= self.hybrid_alpha <= 1.0:
            raise ConfigError(f"hybrid_alpha: {self.hybrid_alpha} is not between 0 and 1")
        for name in ("vector_weight", "lexical_weight", "l0_weight", "name_weight"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: {getattr(self, name)} must not be negative")
        if self.support_threshold is not None and not 0.0 <= self.support_threshold <= 1.0:
            raise ConfigError(f"support_threshold: {self.support_threshold} is not between 0 and 1")
        if self.top_k < 1:
            raise ConfigError(f"top_k: {self.top_k} must be at least 1")
        if not 1 <= self.candidate_depth <= MAX_CANDIDATE_DEPTH:
            raise ConfigError(f"candidate_depth: {self.candidate_depth} is not between 1 and {MAX_CANDIDATE_DEPTH}")
        object.__setattr__(self, "missing_score", _one_of(MissingScore, self.missing_score, "missing_score"))
        if self.l1_timeout_s <= 0:
            raise ConfigError(f"l1_timeout_s: {self.l1_timeout_s} must be positive")
        if self.app_l1_wait_s < 0:
            raise ConfigError(f"app_l1_wait_s: {self.app_l1_wait_s} must be zero or more")
        for name in ("replication_factor", "shards"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name}: {getattr(self, name)} must be at least 1")
        if self.consistency is not None:
            level = str(self.consistency).strip().upper()
            if level not in values(Consistency):
                raise ConfigError(
                    f"consistency (LOOKUP_CONSISTENCY): {str(self.consistency)!r} is not one of {', '.join(values(Consistency))}"
                )
            object.__setattr__(self, "consistency", Consistency(level))
        compression = str(self.vector_compression).strip().lower()
        if compression not in values(VectorCompression):
            raise ConfigError(
                f"vector_compression (LOOKUP_VECTOR_COMPRESSION): {str(self.vector_compression)!r} is not one of "
                f"{', '.join(values(VectorCompression))}"
            )
        object.__setattr__(self, "vector_compression", VectorCompression(compression))
        DbBudget(self.db_memory_limit, self.db_threads)  # ConfigError naming LOOKUP_DB_MEMORY_LIMIT / LOOKUP_DB_THREADS

    @property
    def invocation_db(self) -> Path:
        return self.db_path or self.data_dir / "invocations.duckdb"

    @property
    def judged_sets_dir(self) -> Path:
        """Where the app writes eval sets judged in it: a user data folder, never the repository by default."""
        return self.judgments_dir or self.invocation_db.parent / "judged-eval-sets"

    @property
    def weaviate_data_dir(self) -> Path:
        return self.data_dir / f"weaviate-{self.home_port or self.embedded_port}"

    @property
    def weaviate_node(self) -> str:
        """The embedded server's node name, kept in its data (weaviate-client names it after the port it started on)."""
        return f"Embedded_at_{self.home_port or self.embedded_port}"

    def options(self) -> LookupOptions:
        """What the core reads of these settings (the one conversion, made at the edge)."""
        return LookupOptions(**{name: getattr(self, name) for name in OPTION_FIELDS})

    def with_(self, **changes: Any) -> Settings:
        """A copy with changes. A new corpus folder or model brings its own derived collection, unless one was set."""
        derived = self.collection == collection_for(self.corpus_dir, self.embedding_model)
        if ("corpus_dir" in changes or "embedding_model" in changes) and "collection" not in changes and derived:
            changes["collection"] = ""
        return dataclasses.replace(self, **changes)


def _one_of(kind: type[Any], value: Any, name: str) -> Any:
    """`value` as a member of the enum `kind`, or ConfigError naming the setting and the values it takes."""
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"{name}: '{value}' is not one of {', '.join(values(kind))}") from None


def db_budget(settings: Settings | None = None) -> DbBudget:
    """The DuckDB memory budget `settings` name; without them, the one the settings file and environment name."""
    settings = load_settings() if settings is None else settings
    return DbBudget(settings.db_memory_limit, settings.db_threads)


def collection_for(corpus_dir: Path | str, model: str = DEFAULT_MODEL) -> str:
    """The default Weaviate collection of a corpus folder and model: Kb_, the folder's name and the model's
    slug, e.g. Kb_runbooks_bge_small. Each model has its own, so vectors of two models never mix."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(corpus_dir).resolve().name).strip("_")
    return f"Kb_{name or 'corpus'}_{spec_of(model).slug}"


ENV_NAMES = {
    "LOOKUP_CORPUS_DIR": "corpus_dir",
    "LOOKUP_DATA_DIR": "data_dir",
    "LOOKUP_DB_PATH": "db_path",
    "LOOKUP_JUDGMENTS_DIR": "judgments_dir",
    "LOOKUP_WEAVIATE_URL": "weaviate_url",
    "LOOKUP_WEAVIATE_API_KEY": "weaviate_api_key",
    "LOOKUP_WEAVIATE_REMOTE_GRPC_PORT": "remote_grpc_port",
    "LOOKUP_WEAVIATE_BIN_DIR": "weaviate_bin_dir",
    "LOOKUP_WEAVIATE_PORT": "embedded_port",
    "LOOKUP_WEAVIATE_GRPC_PORT": "embedded_grpc_port",
    "LOOKUP_COLLECTION": "collection",
    "LOOKUP_EMBEDDING_MODEL": "embedding_model",
    "LOOKUP_MODEL_DIR": "model_dir",
    "LOOKUP_L1_ENABLED": "l1_enabled",
    "LOOKUP_SEARCH_MODE": "search_mode",
    "LOOKUP_HYBRID_ALPHA": "hybrid_alpha",
    "LOOKUP_TOP_K": "top_k",
    "LOOKUP_CANDIDATE_DEPTH": "candidate_depth",
    "LOOKUP_MISSING_SCORE": "missing_score",
    "LOOKUP_L1_TIMEOUT_S": "l1_timeout_s",
    "LOOKUP_APP_L1_WAIT_S": "app_l1_wait_s",
    "LOOKUP_SESSION_TAG": "session_tag",
    "LOOKUP_L0_WEIGHT": "l0_weight",
    "LOOKUP_NAME_WEIGHT": "name_weight",
    "LOOKUP_VECTOR_WEIGHT": "vector_weight",
    "LOOKUP_LEXICAL_WEIGHT": "lexical_weight",
    "LOOKUP_SUPPORT_THRESHOLD": "support_threshold",
    "LOOKUP_READ_ONLY": "read_only",
    "LOOKUP_READ_ONLY_RECORDS": "read_only_records",
    "LOOKUP_REPLICATION_FACTOR": "replication_factor",
    "LOOKUP_SHARDS": "shards",
    "LOOKUP_CONSISTENCY": "consistency",
    "LOOKUP_DB_MEMORY_LIMIT": "db_memory_limit",
    "LOOKUP_DB_THREADS": "db_threads",
    "LOOKUP_VECTOR_COMPRESSION": "vector_compression",
}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _coerce(name: str, value: Any, source: str) -> Any:
    """Turn a raw YAML/env value into the type of Settings field `name`."""
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if value is None or value == "":
        return None if "None" in str(kind) else _fail(name, value, source, "must not be empty")
    try:
        if "Path" in str(kind):
            return Path(os.path.expanduser(str(value)))
        if kind in ("bool", "bool | None"):
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError("expected true or false")
        if kind in ("int", "int | None"):
            return int(value)
        if kind in ("float", "float | None"):
            return float(value)
        return str(value)
    except ValueError as exc:
        return _fail(name, value, source, str(exc))


def _fail(name: str, value: Any, source: str, why: str) -> Any:
    raise ConfigError(f"{source}: {name} = {value!r}: {why}")


def load_settings(config_file: Path | None = None, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Defaults < YAML file (LOOKUP_CONFIG or ./lookup.yaml) < environment < explicit overrides."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or (Path(env["LOOKUP_CONFIG"]) if env.get("LOOKUP_CONFIG") else Path("lookup.yaml"))
    if path.is_file():
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of settings, got {type(raw).__name__}")
        known = {f.name for f in fields(Settings)}
        for key, value in raw.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown setting '{key}' (known: {', '.join(sorted(known))})")
            values[key] = _coerce(key, value, str(path))
    elif config_file is not None:
        raise ConfigError(f"{config_file}: config file not found")
    for env_name, key in ENV_NAMES.items():
        if env_name in env:
            values[key] = _coerce(key, env[env_name], env_name)
    values.update({k: _coerce(k, v, "argument") for k, v in overrides.items() if v is not None})
    return Settings(**values)


# --- Where a value comes from: the environment is read here ------------------------------------------------
# load_settings reads LOOKUP_CONFIG and the ENV_NAMES variables; other modules ask the functions below instead of
# reading os.environ (only the builders of child processes pass an environment on).
ENV_PREFIX = "LOOKUP_"  # every variable the project reads
CONFIG_ENV = "LOOKUP_CONFIG"
SERVER_TOKEN_ENV = "LOOKUP_SERVER_TOKEN"  # serve's bearer token: not a setting, so never in a file or a saved run
ENV_OF = {setting: env_name for env_name, setting in ENV_NAMES.items()}  # setting -> its LOOKUP_* variable
SETTING_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Settings)}
SECRET_SETTINGS = tuple(f.name for f in fields(Settings) if not f.repr)  # kept out of reprs, saved runs and files


def _environment(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def child_environment(settings: Settings | None = None, env: Mapping[str, str] | None = None, **variables: str) -> dict[str, str]:
    """A child process's environment: `env` (this process's) without any LOOKUP_ variable, then every setting of
    `settings` that is set, as its variable (a child that reads them has the same settings), then `variables`."""
    out = {k: v for k, v in _environment(env).items() if not k.startswith(ENV_PREFIX)}
    if settings is not None:
        for name, field in ENV_NAMES.items():
            value = getattr(settings, field)
            if value is not None:
                out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out | variables


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The settings file load_settings reads: LOOKUP_CONFIG, else ./lookup.yaml."""
    env = _environment(env)
    return Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else Path("lookup.yaml")


def set_by_environment(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The LOOKUP_* variable that sets setting `name` now (it wins over the settings file), or None."""
    env_name = ENV_OF.get(name)
    return env_name if env_name is not None and env_name in _environment(env) else None


def corpus_from_environment(env: Mapping[str, str] | None = None) -> bool:
    """Whether LOOKUP_CORPUS_DIR names the corpus: then it, not an eval set's own `corpus:` field, is used."""
    return bool(_environment(env).get(ENV_OF["corpus_dir"]))


def eval_set_corpus(explicit: Path | None, named: Path | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The corpus_dir an eval set runs on: `explicit` (--corpus), else the folder the set names unless
    LOOKUP_CORPUS_DIR is set. None: the loaded settings' corpus."""
    return explicit or (None if corpus_from_environment(env) else named)


def server_token(env: Mapping[str, str] | None = None) -> str | None:
    """LOOKUP_SERVER_TOKEN, the bearer token `serve --transport http` requires; None when unset or empty."""
    return _environment(env).get(SERVER_TOKEN_ENV) or None


# --- Which settings decide what a lookup returns ------------------------------------------------------------
# A saved run, a replay and a sweep care about the retrieval-quality settings. Every other setting says where
# things are (files, servers, ports, the collection) or how the service runs (time limit, tag, replicas).
# Derived from the fields: a new setting counts as retrieval quality unless it is named here.
NOT_QUALITY = frozenset(
    {
        *("corpus_dir", "data_dir", "db_path", "judgments_dir", "collection", "model_dir"),  # where the corpus, data, model are
        *("weaviate_url", "weaviate_api_key", "remote_grpc_port", "weaviate_version", "weaviate_bin_dir"),  # which Weaviate
        *("embedded_port", "embedded_grpc_port", "home_port"),
        *(
            "l1_timeout_s",
            "app_l1_wait_s",
            "session_tag",
            "read_only",
            "read_only_records",
            "replication_factor",
            "shards",
            "consistency",
        ),
        *("db_memory_limit", "db_threads"),  # the DuckDB files' memory budget
        "vector_compression",  # how the collection stores its vectors: fixed when it is made, so no sweep can vary it
    }
)
QUALITY_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(Settings) if f.name not in NOT_QUALITY)
# An eval run and a sweep rank L1's candidates, so L1 is on in every one: they report and vary the others.
EVAL_SETTINGS: tuple[str, ...] = tuple(name for name in QUALITY_SETTINGS if name != "l1_enabled")
