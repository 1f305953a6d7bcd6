#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer: configures build-asan/
# with -DKVC_SANITIZE=ON, builds everything and runs every CTest test (extra arguments go to ctest).
# A sanitizer report aborts the test that triggered it (-fno-sanitize-recover=all), so a clean run is
# a passing ctest. docs/reliability.md has the measured time and why each option below is set.
#   fuzz/sanitize.sh [-L unit ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build-asan"
if [ ! -f "$build/CMakeCache.txt" ]; then
  prefix="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DKVC_SANITIZE=ON "${launcher[@]}" >/dev/null
fi
start=$(date +%s)
cmake --build "$build" -j "$(nproc)" >/dev/null
echo "sanitize: build took $(( $(date +%s) - start )) s"
# LibTorch, GoogleTest and RapidCheck are not instrumented.
export ASAN_OPTIONS="${ASAN_OPTIONS:-strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/fuzz/lsan.supp}"
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@")
echo "sanitize: ctest took $(( $(date +%s) - start )) s"
