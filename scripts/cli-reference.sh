#!/usr/bin/env bash
# Write docs/cli.md, the command-line reference, from the commands' own help (typer's docs generator); the suite checks
# that it is current (tests/cli/test_reference.py). Run it after changing a command or an option.
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" -m typer retrieval.cli.commands utils docs --name "python -m retrieval" --output docs/cli.md
