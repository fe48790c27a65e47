"""An eval set case as YAML text: its fields written on one line each, the way a person would, and the case
inserted after the last item of a file's `cases:` block list, every other byte of the file left as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import EvalSetError


def yaml_field(key: str, value: Any) -> str:
    """`key: value` as YAML writes it on one line (quoted where needed; lists of ids in flow style)."""
    if isinstance(value, list):
        return f"{key}: {yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6).strip()}"
    return yaml.safe_dump({key: value}, default_flow_style=False, allow_unicode=True, width=10**6).rstrip("\n")


def indented(lines: list[str], first: str, rest: str, newline: str = "\n") -> str:
    return newline.join([first + lines[0], *(rest + line for line in lines[1:])]) + newline


def insert_case(text: str, case_lines: list[str], path: Path) -> str:
    """`text` with the case added after the last item of its block list `cases:`; nothing else changes."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise EvalSetError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    cases = next((v for k, v in (root.value if isinstance(root, yaml.MappingNode) else []) if k.value == "cases"), None)
    if not isinstance(cases, yaml.SequenceNode) or not cases.value:
        raise EvalSetError(f"{path}: field 'cases' must be a non-empty list")
    if cases.flow_style:
        raise EvalSetError(f"{path}: field 'cases' is a flow list ([...]): write it as a block list (- id: ...) to append")
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    first, last = cases.value[0], cases.value[-1]
    dash = lines[first.start_mark.line].find("-")
    if dash < 0 or dash >= first.start_mark.column:
        raise EvalSetError(f"{path}: field 'cases': cannot find where its items start")
    item = first.start_mark.column
    # After the last item's last line of content: its end mark stands at the next token, past trailing
    # blank lines and comments, which stay where they are (after the new case).
    end = last.end_mark.line if last.end_mark.column == 0 else last.end_mark.line + 1
    end = min(end, len(lines))
    while end - 1 > last.start_mark.line and (not lines[end - 1].strip() or _outer_comment(lines[end - 1], item)):
        end -= 1
    head = "".join(lines[:end])
    if head and not head.endswith(("\n", "\r")):
        head += newline
    block = indented(case_lines, " " * dash + "-" + " " * (item - dash - 1), " " * item, newline)
    return head + block + "".join(lines[end:])


def _outer_comment(line: str, item: int) -> bool:
    """A comment line no deeper than the item's keys: not the text of a block scalar (always deeper)."""
    body = line.lstrip(" ")
    return body.startswith("#") and len(line) - len(body) <= item
