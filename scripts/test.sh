#!/usr/bin/env bash
# Set everything up (packages, the Weaviate build, chromium), run the lint, format and type checks
# (scripts/lint.sh), the wheel check (scripts/check-wheel.sh: the installed package's console script), then the
# whole test suite, whatever the checks said: one run reports everything, and it fails if any part failed.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh --browser || exit 1
PYTHON="$PYTHON" bash scripts/lint.sh
lint_rc=$?
PYTHON="$PYTHON" bash scripts/check-wheel.sh
wheel_rc=$?
"$PYTHON" -m pytest -ra "$@"
rc=$?
if [ "$rc" = 5 ]; then
    echo "error: pytest collected no tests; the suite is broken" >&2
    rc=1
fi
if [ "$lint_rc" != 0 ]; then
    echo "error: the checks of scripts/lint.sh failed (see its 'lint failed:' line above)" >&2
    [ "$rc" = 0 ] && rc=1
fi
if [ "$wheel_rc" != 0 ]; then
    echo "error: the wheel check of scripts/check-wheel.sh failed (see its 'wheel check failed:' line above)" >&2
    [ "$rc" = 0 ] && rc=1
fi
exit "$rc"
