"""What a saved run records of where it came from: its id, the hash of its eval set's cases, the code version,
and the settings it ran with."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import uuid
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from retrieval.config import REPO_ROOT, SECRET_SETTINGS, Settings
from retrieval.evals.evaluation import EvalReport
from retrieval.evals.sets import EvalSet


def set_hash(eval_set: EvalSet) -> str:
    """A hash of the cases' content (id, query, expected, domain): equal sets hash equal whatever the file's layout."""
    canonical = json.dumps([c.to_dict() for c in eval_set.cases], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=1)
def code_version() -> str | None:
    """`git describe --always --dirty` of the repository when it is a git checkout, else the package version."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from importlib.metadata import PackageNotFoundError, version

        return f"lookup-lab {version('lookup-lab')}"
    except PackageNotFoundError:
        return None


def settings_dict(settings: Settings) -> dict[str, Any]:
    """Every setting (paths as text), without secrets."""
    out = {}
    for f in dataclasses.fields(settings):
        if f.name in SECRET_SETTINGS:
            continue
        value = getattr(settings, f.name)
        out[f.name] = str(value) if isinstance(value, Path) else value
    return out


def run_settings(report: EvalReport, settings: Settings) -> dict[str, Any]:
    """The settings saved with a run: every setting, with the model and the depth (top_k) the report says it ran
    with (an eval ranks at least DEPTH entries, whatever the app's top_k), so a run's label, JSON and report agree."""
    out = settings_dict(settings)
    for name in ("embedding_model", "top_k"):
        if report.settings.get(name):
            out[name] = report.settings[name]
    return out


def new_run_id() -> str:
    """Sortable and short enough to type: 20261201-102600-3fa2."""
    return f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
