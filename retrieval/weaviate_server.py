"""Reaching a real Weaviate: the embedded server (built from its Go module) or an existing one by URL."""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import weaviate
from weaviate.classes.init import AdditionalConfig, Auth, Timeout

from .config import Settings
from .errors import L1Error, WeaviateSetupError

EMBEDDED_ENV = {
    "ENABLE_MODULES": "",
    "DISABLE_TELEMETRY": "true",
    "LOG_LEVEL": "error",
    "AUTOSCHEMA_ENABLED": "false",
    "CLUSTER_ADVERTISE_ADDR": "127.0.0.1",
    "CLUSTER_BIND_ADDR": "127.0.0.1",
}


def binary_name(version: str) -> str:
    """The file name weaviate-client's embedded mode looks for in its binary_path."""
    tag = "v" + version.lstrip("v")
    return f"weaviate-{tag}-{hashlib.sha256(tag.encode('utf-8')).hexdigest()}"


def embedded_binary(settings: Settings) -> Path:
    return Path(settings.weaviate_bin_dir) / binary_name(settings.weaviate_version)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


def _config(settings: Settings) -> AdditionalConfig:
    t = settings.l1_timeout_s
    return AdditionalConfig(timeout=Timeout(init=max(t, 5.0), query=t, insert=max(t, 60.0)))


@contextmanager
def _server_output_to(log_path: Path):
    """The embedded server inherits stdout/stderr; send them to a log so `--json` output stays clean."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def connect(settings: Settings) -> weaviate.WeaviateClient:
    """A connected client. Raises L1Error(unavailable=True) when no server can be reached."""
    try:
        if settings.weaviate_url:
            return _connect_url(settings)
        return _connect_embedded(settings)
    except (L1Error, WeaviateSetupError):
        raise
    except Exception as exc:
        where = settings.weaviate_url or f"embedded Weaviate on 127.0.0.1:{settings.embedded_port}"
        raise L1Error(f"cannot reach {where}: {exc}", unavailable=True) from exc


def _connect_url(settings: Settings) -> weaviate.WeaviateClient:
    url = urlparse(settings.weaviate_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise L1Error(f"LOOKUP_WEAVIATE_URL: '{settings.weaviate_url}' is not an http(s) URL", unavailable=True)
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    auth = Auth.api_key(settings.weaviate_api_key) if settings.weaviate_api_key else None
    grpc_port = settings.remote_grpc_port or (443 if secure else 50051)
    client = weaviate.connect_to_custom(
        http_host=url.hostname, http_port=port, http_secure=secure,
        grpc_host=url.hostname, grpc_port=grpc_port, grpc_secure=secure,
        auth_credentials=auth, additional_config=_config(settings), skip_init_checks=False,
    )
    return client


def _connect_embedded(settings: Settings) -> weaviate.WeaviateClient:
    host, port, grpc_port = "127.0.0.1", settings.embedded_port, settings.embedded_grpc_port
    if port_open(host, port) and port_open(host, grpc_port):
        # A server from the app, another CLI call or a crashed run already serves this data directory's port.
        return weaviate.connect_to_local(host=host, port=port, grpc_port=grpc_port, additional_config=_config(settings))
    if port_open(host, port) or port_open(host, grpc_port):
        busy = port if port_open(host, port) else grpc_port
        raise WeaviateSetupError(
            f"port {busy} on 127.0.0.1 is taken by something that is not a Weaviate with both ports up; "
            "stop it, or choose other ports with LOOKUP_WEAVIATE_PORT and LOOKUP_WEAVIATE_GRPC_PORT"
        )
    binary = embedded_binary(settings)
    if not binary.is_file():
        raise WeaviateSetupError(
            f"the Weaviate server binary {binary} is missing: run scripts/setup.sh to build it, "
            "or set LOOKUP_WEAVIATE_URL to use an existing Weaviate"
        )
    data_dir = settings.weaviate_data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    with _server_output_to(data_dir / "server.log"):
        return weaviate.connect_to_embedded(
            version=settings.weaviate_version,
            binary_path=str(settings.weaviate_bin_dir),
            persistence_data_path=str(data_dir),
            port=port,
            grpc_port=grpc_port,
            environment_variables=dict(EMBEDDED_ENV),
            additional_config=_config(settings),
        )
