#!/usr/bin/env bash
# Installs routerag with every extra and its test tools on a fresh machine (Debian + CPython 3.11).
# constraints-cpu.txt picks the local CPU torch (2.13.0) inside pyproject's range; llama-cpp-python compiles once (~5 min) and pip caches the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -c constraints-cpu.txt -e ".[all,dev]"
# a real headless browser for the web UI tests (Debian's chromium; Playwright drives it)
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; browser tests will be skipped" >&2
  fi
fi
