"""Writing chosen settings into the settings file (LOOKUP_CONFIG or ./lookup.yaml), diff first, line by line: a setting's
own top-level line is replaced or appended, and every other line (comments, order) stays as it was.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from retrieval.config import SETTING_DEFAULTS, set_by_environment
from retrieval.config import config_path as config_path  # the file load_settings reads; the Sweep page imports it from here
from retrieval.errors import ConfigError


@dataclass(frozen=True)
class SettingChange:
    name: str
    before: Any
    after: Any
    source: str  # where `before` comes from: the file's name, or "default"

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.name, "before": self.before, "after": self.after, "before_from": self.source}


@dataclass(frozen=True)
class ConfigPlan:
    """What writing `chosen` into `path` changes: per setting, and as the file's text before and after."""

    path: Path
    exists: bool
    changes: tuple[SettingChange, ...]
    text_before: str
    text_after: str
    overridden_by_env: tuple[str, ...]  # LOOKUP_* variables set now that win over the file

    @property
    def diff(self) -> str:
        label = str(self.path)
        lines = difflib.unified_diff(
            self.text_before.splitlines(keepends=True),
            self.text_after.splitlines(keepends=True),
            fromfile=label if self.exists else "/dev/null",
            tofile=label,
        )
        return "".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "exists": self.exists,
            "changes": [c.to_dict() for c in self.changes],
            "diff": self.diff,
            "overridden_by_env": list(self.overridden_by_env),
        }


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.is_file():
        return "", {}
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return text, data


def _line(name: str, value: Any) -> str:
    return yaml.safe_dump({name: value}, default_flow_style=False, sort_keys=False).strip()


def plan_config(path: Path, chosen: Mapping[str, Any], env: Mapping[str, str] | None = None) -> ConfigPlan:
    """The settings of `chosen` whose value differs from what the file (or, without it there, the default)
    gives, and the file's text with those lines replaced or added."""
    text, data = _read(path)
    changes, after = [], text
    for name, value in chosen.items():
        if name not in SETTING_DEFAULTS:
            raise ConfigError(f"{name}: not a setting (known: {', '.join(sorted(SETTING_DEFAULTS))})")
        before, source = (data[name], path.name) if name in data else (SETTING_DEFAULTS[name], "default")
        if before == value:
            continue
        changes.append(SettingChange(name, before, value, source))
        pattern = re.compile(rf"^{re.escape(name)}\s*:.*$", re.MULTILINE)
        if name in data and pattern.search(after):
            after = pattern.sub(lambda _m: _line(name, value), after, count=1)  # noqa: B023
        else:
            after = after + ("" if not after or after.endswith("\n") else "\n") + _line(name, value) + "\n"
    try:
        reread = yaml.safe_load(after) or {}
    except yaml.YAMLError:
        reread = {}
    wrong = [c.name for c in changes if not isinstance(reread, dict) or reread.get(c.name) != c.after]
    if wrong:
        raise ConfigError(f"{path}: cannot set {', '.join(wrong)} by editing its line; edit the file by hand")
    overridden = tuple(filter(None, (set_by_environment(name, env) for name in chosen)))
    return ConfigPlan(path, path.is_file(), tuple(changes), text, after, overridden)


def write_config(plan: ConfigPlan) -> None:
    """Write the planned text, unless the file changed since the plan was made (then nothing is written)."""
    now, _ = _read(plan.path)
    if now != plan.text_before:
        raise ConfigError(f"{plan.path}: changed since the diff was made; look at the new diff and save again")
    written, _ = _write(plan.path, plan.text_after)
    if written != plan.text_after:
        raise ConfigError(f"{plan.path}: the written file does not read back as planned")


def _write(path: Path, text: str) -> tuple[str, dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return _read(path)
