#!/usr/bin/env bash
# build/tools: a small venv with uv and wheel (requirements/tools.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "setup: tools venv build/tools (uv, wheel)"
python3 -m venv build/tools
build/tools/bin/python -m pip install --quiet --disable-pip-version-check \
  -r requirements/tools.txt
touch build/tools/.stamp
