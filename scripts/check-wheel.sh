#!/usr/bin/env bash
# The wheel check: build the wheel (from a copy of the source, so the tree gets no build/ or egg-info), install it
# into a fresh venv that reuses the installed dependencies, and run the `lookup-lab` console script from a temporary
# folder outside the repository, on the installed defaults (the sample corpus the wheel installs, the data folder
# under XDG_DATA_HOME, here a temporary one) and an embedded Weaviate on free ports: --help, every module imports,
# ingest, lookup (must answer L0+L1), runs. Needs scripts/setup.sh's Weaviate build and model files.
# Exits non-zero naming the step that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/lookup-lab-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { echo "== wheel check ($((SECONDS - started)) s): $*" >&2; }
fail() {
    echo "wheel check failed: $*" >&2
    exit 1
}

step "build the wheel"
mkdir -p "$work/src" "$work/dist" "$work/run" "$work/xdg"
tar --exclude-vcs --exclude=./.lookup-lab --exclude='./.*_cache' --exclude=./.hypothesis --exclude=./test-artifacts \
    --exclude=./build --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -xf - -C "$work/src"
"$PYTHON" -m pip wheel --quiet --no-deps -w "$work/dist" "$work/src" || fail "pip wheel could not build the wheel"
wheels=("$work"/dist/lookup_lab-*.whl)
[ -f "${wheels[0]}" ] || fail "pip wheel made no lookup_lab-*.whl"

step "install $(basename "${wheels[0]}") into a fresh venv (--system-site-packages: the dependencies are reused)"
"$PYTHON" -m venv --system-site-packages --without-pip "$work/venv" || fail "python -m venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet --no-deps --no-index "${wheels[0]}" || fail "pip install of the wheel"
lookup_lab="$work/venv/bin/lookup-lab"
[ -x "$lookup_lab" ] || fail "the wheel installed no lookup-lab console script"

# Only the installed defaults, temporary data and free ports: no LOOKUP_* setting of the caller's, except where
# the model files and the Weaviate build are; no PYTHONPATH, so the package comes from the venv.
for name in $(compgen -e); do
    case "$name" in
    LOOKUP_MODEL_DIR | LOOKUP_WEAVIATE_BIN_DIR) ;;
    LOOKUP_*) unset "$name" ;;
    esac
done
unset PYTHONPATH
export XDG_DATA_HOME="$work/xdg"
read -r http_port grpc_port < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
')
export LOOKUP_WEAVIATE_PORT=$http_port LOOKUP_WEAVIATE_GRPC_PORT=$grpc_port
cd "$work/run"

step "lookup-lab --help"
help=$("$lookup_lab" --help) || fail "lookup-lab --help exited non-zero"
for command in ingest lookup sql eval runs compare sweep tune calibrate replay models serve bench cluster; do
    grep -qw -- "$command" <<<"$help" || fail "lookup-lab --help does not list the '$command' command"
done

step "every module of the installed packages imports, from the venv"
STREAMLIT_LOGGER_LEVEL=error "$venv_python" - "$work/venv" <<'EOF' || fail "a module of the installed wheel does not import (see above)"
import importlib
import pkgutil
import sys
from pathlib import Path

venv = Path(sys.argv[1]).resolve()
for top in ("retrieval", "app_support"):
    package = importlib.import_module(top)
    if venv not in Path(package.__file__).resolve().parents:
        sys.exit(f"{top} was imported from {package.__file__}, not from the venv")
    for module in pkgutil.walk_packages(package.__path__, f"{top}."):
        if not module.name.endswith(".__main__"):  # that one runs the CLI
            importlib.import_module(module.name)
from retrieval.config import IN_CHECKOUT, Settings

settings = Settings()
if IN_CHECKOUT or not settings.corpus_dir.is_dir():
    sys.exit(f"installed: in a checkout {IN_CHECKOUT}, sample corpus {settings.corpus_dir} (not found)")
print(f"installed defaults: corpus {settings.corpus_dir}, data {settings.data_dir}", file=sys.stderr)
EOF

step "lookup-lab ingest (embedded Weaviate on 127.0.0.1:$http_port, gRPC $grpc_port)"
"$lookup_lab" ingest >"$work/ingest.json" || fail "lookup-lab ingest exited non-zero"

step "lookup-lab lookup \"Pod is crash looping.\" --json"
"$lookup_lab" lookup "Pod is crash looping." --json >"$work/lookup.json" || fail "lookup-lab lookup exited non-zero"
# the lookup's record waits in the spool beside the store; `sql` moves it in first
"$lookup_lab" sql "SELECT id FROM tool_invocation" --json >"$work/recorded.json" || fail "lookup-lab sql exited non-zero"
"$venv_python" - "$work/lookup.json" "$XDG_DATA_HOME" "$work/recorded.json" <<'EOF' || fail "lookup-lab lookup did not answer as it should (see above)"
import json
import sys
from pathlib import Path

result = json.loads(Path(sys.argv[1]).read_text())
if result["layer"] != "L0+L1" or not result["results"]:
    sys.exit(f"expected layer L0+L1 with results, got layer {result['layer']!r}, L1 {result['l1']}")
store = Path(sys.argv[2]) / "lookup-lab" / "invocations.duckdb"
if not store.is_file():
    sys.exit(f"the invocation store is not in the user data folder: {store} is missing")
recorded = [json.loads(line)["id"] for line in Path(sys.argv[3]).read_text().splitlines() if line.strip()]
if recorded != [result["invocation_id"]]:
    sys.exit(f"the store holds {recorded}, not the lookup's invocation {result['invocation_id']}")
print(f"lookup: layer {result['layer']}, first {result['results'][0]['entry_id']}, recorded", file=sys.stderr)
EOF

step "lookup-lab runs --json"
"$lookup_lab" runs --json >"$work/runs.json" || fail "lookup-lab runs exited non-zero"
"$venv_python" -c 'import json, sys; runs = json.load(open(sys.argv[1])); assert isinstance(runs, list), runs' \
    "$work/runs.json" || fail "lookup-lab runs --json did not print a JSON list"

echo "wheel check: passed in $((SECONDS - started)) s" >&2
