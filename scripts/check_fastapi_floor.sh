#!/usr/bin/env bash
# The admission bound gives an ask back when its `yield` dependency exits, after the streamed
# response, which holds from FastAPI 0.118 (pyproject's floor). This checks a FastAPI version against
# the admission tests in a throw-away venv over the installed environment:
#   bash scripts/check_fastapi_floor.sh            # the floor, 0.118.0: passes
#   bash scripts/check_fastapi_floor.sh 0.117.1    # below it: the stream's give-back test fails
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-0.118.0}
VENV=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$VENV")"' EXIT
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q "fastapi==$VERSION" 2>&1 | grep -v "dependency resolver\|sse-starlette" || true
"$VENV/bin/python" -c "import fastapi, starlette; print('fastapi', fastapi.__version__, 'starlette', starlette.__version__)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -p no:warnings tests/service/test_service_admission.py
