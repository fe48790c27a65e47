#!/usr/bin/env bash
# Set everything up (packages, the Weaviate build, chromium), run the lint, format and type checks
# (scripts/lint.sh), the wheel check (scripts/check-wheel.sh), then the whole test suite, whatever the checks said:
# one run reports everything, prints each phase's time, and fails if any part failed.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slow"`.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
started=$SECONDS
LOOKUP_PHASES=$(mktemp "${TMPDIR:-/tmp}/lookup-lab-phases.XXXXXX")
export LOOKUP_PHASES
trap 'rm -f "$LOOKUP_PHASES"' EXIT
timed() {  # timed NAME COMMAND...: run it, record its time as the phase NAME, keep its exit status
    local name=$1 t0=$SECONDS rc
    shift
    "$@"
    rc=$?
    echo "phase $name: $((SECONDS - t0)) s" >&2
    printf '%s\t%s\n' "$name" "$((SECONDS - t0))" >>"$LOOKUP_PHASES"
    return "$rc"
}
phase_table() {
    echo >&2
    echo "== phase times" >&2
    awk -F'\t' '{ printf "  %-16s %6d s\n", $1, $2 }' "$LOOKUP_PHASES" >&2
    printf '  %-16s %6d s\n' "total" "$((SECONDS - started))" >&2
}

bash scripts/setup.sh --browser || { phase_table; exit 1; }
PYTHON="$PYTHON" bash scripts/lint.sh
lint_rc=$?
PYTHON="$PYTHON" timed wheel bash scripts/check-wheel.sh
wheel_rc=$?
timed tests "$PYTHON" -m pytest -ra --durations=15 -n "${LOOKUP_TEST_WORKERS:-2}" "$@"
rc=$?
phase_table
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
