#!/usr/bin/env bash
# cargo with the build cache outside the clone, so fresh clones (CI) reuse compiled dependencies.
set -euo pipefail
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agent-payment-gateway/target}"
cd "$(dirname "$0")/.."
exec cargo "$@"
