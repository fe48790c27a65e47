#!/usr/bin/env bash
# Set everything up (packages, the Weaviate build, chromium) and run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh --browser || exit 1
"$PYTHON" -m pytest -ra "$@"
rc=$?
if [ "$rc" = 5 ]; then
    echo "error: pytest collected no tests; the suite is broken" >&2
    exit 1
fi
exit "$rc"
