#!/usr/bin/env bash
# The whole test suite: set up if needed, then every CTest test (unit, property, cli labels).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)" "$@"
