#!/usr/bin/env bash
# The main job: set up if needed, then `kvconform run` (arguments are passed on; none = defaults).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
exec build/cli/kvconform run "$@"
