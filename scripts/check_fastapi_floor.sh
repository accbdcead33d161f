#!/usr/bin/env bash
# An ask's reply gives its admission back itself where the ask ends (a streamed one when its
# response ends: sent, failed, cancelled or abandoned), so the bound does not depend on when FastAPI
# exits a `yield` dependency (0.106 to 0.117 exit it before a streamed response is sent). This checks
# a FastAPI version against the admission tests in a throw-away venv over the installed environment:
#   bash scripts/check_fastapi_floor.sh            # pyproject's floor, 0.110.0 (starlette 0.36.3): passes
#   bash scripts/check_fastapi_floor.sh 0.117.1    # (starlette 0.48.0): passes
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-0.110.0}
VENV=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$VENV")"' EXIT
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q "fastapi==$VERSION" 2>&1 | grep -v "dependency resolver\|sse-starlette" || true
"$VENV/bin/python" -c "import fastapi, starlette; print('fastapi', fastapi.__version__, 'starlette', starlette.__version__)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -p no:warnings tests/service/test_service_admission.py
