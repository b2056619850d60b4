#!/usr/bin/env bash
# cargo with the build cache outside the clone, so fresh clones (CI) reuse compiled dependencies.
set -euo pipefail
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agent-payment-gateway/target}"
cd "$(dirname "$0")/.."
# LiteSVM's `precompiles` feature (the ed25519 check of channel vouchers) pulls agave-precompiles,
# which asks for a vendored OpenSSL: built from C sources, about ten minutes on two cores. With a
# system OpenSSL (libssl-dev) present, link that instead; without one the vendored build still works.
if [ -z "${OPENSSL_NO_VENDOR+x}" ] && command -v pkg-config >/dev/null && pkg-config --exists openssl 2>/dev/null; then
  export OPENSSL_NO_VENDOR=1
fi
exec cargo "$@"
