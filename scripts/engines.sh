#!/usr/bin/env bash
# Engines end to end (docs/engines.md): builds the project if needed, installs every engine of
# engines/engines.json into the cache (transformers' pinned releases, llama.cpp's library and its
# worker, mlx-lm), then runs `kvconform engine` with the arguments given (default: every
# configuration, the fixed plans). Progress on stderr.
#
#   bash scripts/engines.sh                          # everything (about 15 minutes here)
#   bash scripts/engines.sh --engine '^llama' -v     # one engine, every per-step error
#   bash scripts/engines.sh --setup-only             # install, run nothing
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
setup_only=0
if [ "${1:-}" = --setup-only ]; then setup_only=1; shift; fi
say() { echo "engines: $*" >&2; }

bash scripts/setup.sh
for req in golden/requirements-*.txt; do
  v="${req#golden/requirements-}"; v="${v%.txt}"
  say "transformers $v (golden/.venv-$v)"
  bash golden/setup_env.sh "$v" >/dev/null
done
say "mlx-lm (engines/mlx/requirements.txt)"
bash engines/setup_env.sh mlx >/dev/null
say "llama.cpp library (cached; the first build takes about 8 minutes on 2 cores)"
prefix="$(bash engines/llama_cpp/build_llama.sh)"
say "llama.cpp worker (build-llama/)"
if [ ! -f build-llama/CMakeCache.txt ] || ! grep -q "KVC_LLAMA_ROOT:PATH=$prefix\$" build-llama/CMakeCache.txt; then
  cmake -S engines/llama_cpp -B build-llama -DKVC_LLAMA_ROOT="$prefix" >&2
fi
cmake --build build-llama -j "$(nproc)" >&2
[ "$setup_only" = 1 ] && exit 0
exec build/harness/cli/kvconform engine "$@"
