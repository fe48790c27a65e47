#!/usr/bin/env bash
# Set everything up, index the sample corpus in the embedded Weaviate, and run the app on 127.0.0.1:8501.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
"$PYTHON" -m retrieval ingest
exec "$PYTHON" -m streamlit run app.py --server.address "${LOOKUP_APP_ADDRESS:-127.0.0.1}" \
    --server.port "${LOOKUP_APP_PORT:-8501}" --server.headless true --browser.gatherUsageStats false "$@"
