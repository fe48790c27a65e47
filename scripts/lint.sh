#!/usr/bin/env bash
# Lint, format check and type check, all three every time; exits non-zero naming each one that failed.
# Tools and settings: requirements.txt pins ruff and mypy, pyproject.toml configures them.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
failed=()
phase_done() {  # each phase's time, printed, and appended to $LOOKUP_PHASES when set
    local took=$((SECONDS - phase_start))
    echo "phase $1: ${took} s" >&2
    if [ -n "${LOOKUP_PHASES:-}" ]; then printf '%s\t%s\n' "$1" "$took" >>"$LOOKUP_PHASES"; fi
    phase_start=$SECONDS
}
phase_start=$SECONDS

echo "== ruff check (lint)" >&2
"$PYTHON" -m ruff check . || failed+=("ruff check")

echo "== ruff format --check (formatting)" >&2
"$PYTHON" -m ruff format --check . || failed+=("ruff format --check")
phase_done lint

echo "== mypy (types, over the files pyproject.toml names)" >&2
"$PYTHON" -m mypy || failed+=("mypy")
phase_done types

if [ "${#failed[@]}" -gt 0 ]; then
    joined=$(printf '%s, ' "${failed[@]}")
    echo "lint failed: ${joined%, }" >&2
    exit 1
fi
echo "lint: ruff check, ruff format --check and mypy passed" >&2
