#!/usr/bin/env bash
# The Python client's environment and checks (python/, docs/python.md).
#
#   bash scripts/python.sh setup   # python/.venv (created if missing) with the package and its test extras from PyPI
#   bash scripts/python.sh test    # setup, then ruff (lint + format check), mypy --strict, pytest
#   bash scripts/python.sh bench   # setup, then bench/python/pay_overhead.py (arguments passed on)
#
# `npm run test:python` runs `test` (part of `npm test`); .ci/run runs `setup` before `npm test`.
# The package is installed as a user would install it (a built wheel, not an editable checkout),
# so the tests exercise what would be published. pytest's exit code 5 (no test collected) fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=python/.venv
PY="$VENV/bin/python"

pick_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3.10 python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

setup() {
  if [ ! -x "$PY" ]; then
    local python
    python="$(pick_python)" || { echo "Python >= 3.10 with venv is required (apt-get install python3 python3-venv)" >&2; exit 1; }
    echo "creating $VENV with $("$python" --version)"
    "$python" -m venv "$VENV"
  fi
  "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  # Reinstalled every time: a wheel built from the working tree, with the test extras.
  "$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
  "$PY" -m pip install --quiet --disable-pip-version-check "./python[test]"
}

run_tests() {
  setup
  echo "== ruff (lint, format check)"
  (cd python && .venv/bin/ruff check src tests examples ../bench/python && .venv/bin/ruff format --check src tests examples ../bench/python)
  echo "== mypy --strict"
  (cd python && .venv/bin/mypy --strict)
  echo "== pytest"
  local status=0
  (cd python && .venv/bin/pytest -q -p no:cacheprovider) || status=$?
  if [ "$status" -eq 5 ]; then
    echo "pytest collected no test: failing" >&2
    exit 1
  fi
  exit "$status"
}

case "${1:-test}" in
  setup) setup ;;
  test) run_tests ;;
  bench)
    shift
    setup
    exec "$PY" bench/python/pay_overhead.py "$@"
    ;;
  *)
    echo "usage: bash scripts/python.sh setup|test|bench [bench arguments]" >&2
    exit 2
    ;;
esac
