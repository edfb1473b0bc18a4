#!/usr/bin/env bash
# build/lint-tools: an isolated venv with vLLM's linters at the versions its
# .pre-commit-config.yaml pins (requirements/lint.txt). Idempotent: skips the
# install when the stamp is newer than requirements/lint.txt; otherwise builds
# the venv afresh, so that tools dropped from the list (yapf and isort, gone
# with vLLM 0.32.0) do not linger in it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/lint-tools
stamp=$venv/.stamp
if [ -f "$stamp" ] && [ "$stamp" -nt requirements/lint.txt ] \
    && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "setup: lint venv $venv is up to date"
  exit 0
fi
echo "setup: lint venv $venv (ruff, typos, mypy and the hooks' deps)"
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r requirements/lint.txt
touch "$stamp"
