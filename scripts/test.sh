#!/usr/bin/env bash
# The whole test suite: set up if needed, then every CTest test (unit, property, cli labels).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# python3 may be a version manager's shim (pyenv's is a bash script costing about 0.1 s a start, and
# the suite starts python3 thousands of times): the interpreter it resolves to goes first on PATH.
if py_bin=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) && [ -x "$py_bin/python3" ]; then
  export PATH="$py_bin:$PATH"
fi
# --slice K/N (or auto/N): run the sliced tests (mutant and heavy tests) of one slice of N only, every
# other test as always (scripts/ci_slice.py says why; .ci/run passes auto/6). Taken out of the arguments
# for ctest.
args=() slice=""
while (($#)); do
  case "$1" in
    --slice) [ $# -ge 2 ] || { echo "test.sh: --slice needs K/N" >&2; exit 2; }; slice="$2"; shift 2 ;;
    --slice=*) slice="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
if [ -n "$slice" ]; then
  for a in "$@"; do
    case "$a" in -E|--exclude-regex|-E*|--exclude-regex=*) echo "test.sh: --slice leaves tests out with its own -E; give one or the other" >&2; exit 2 ;; esac
  done
  python3 "$root/scripts/ci_slice.py" "$slice" --which >/dev/null || exit 2
fi
"$root/scripts/setup.sh"
cd "$root/build"
if [ -n "$slice" ]; then
  left_out=$(python3 "$root/scripts/ci_slice.py" "$slice" --build "$root/build")
  echo "test.sh: mutant and heavy tests of slice $(python3 "$root/scripts/ci_slice.py" "$slice" --which) only (the others: KVC_CI_FULL=1 or no --slice)" >&2
  [ -z "$left_out" ] || set -- "$@" -E "$left_out"
  # The batched gtest binaries run their tests in one process (harness/testing/gtest_batch.py): it
  # leaves out the same tests.
  export KVC_CI_SLICE="$(python3 "$root/scripts/ci_slice.py" "$slice" --which)"
fi
# A fresh build has no cost data, and ctest would run the tests in declaration order, the longest
# last: seed it with the measured costs (scripts/ci_minutes.py --costs) so it starts those first.
if [ ! -f Testing/Temporary/CTestCostData.txt ] && [ -f "$root/scripts/ctest-costs.txt" ]; then
  mkdir -p Testing/Temporary
  cp "$root/scripts/ctest-costs.txt" Testing/Temporary/CTestCostData.txt
fi
# The suite starts kvconform-libtorch over a thousand times and the same torch and transformers
# workers hundreds of times: each runs in a child of a fork server that paid LibTorch's initialisers
# or the imports once (cli/zygote.h, python/kvconform/zygote.py). KVC_ZYGOTE=0 turns them off.
export KVC_ZYGOTE="${KVC_ZYGOTE:-1}"
# LibTorch's OpenMP threads (GNU libgomp) spin after each parallel region before they sleep: with three
# jobs on two cores the spinning threads take the cores from the tests that have work
# (docs/performance.md: 17 plugin and engine tests at -j3, 54 s and 106 s of CPU spinning, 17 s and
# 33 s passive). Passive waiting changes no thread count and no result. OMP_WAIT_POLICY set wins.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# One job more than cores: the engine tests wait on their workers and servers (and their threads spin
# while idle), so a third job fills the cores (docs/performance.md: 158.5 s at -j2, 133.2 s at -j3 for
# the llama.cpp and transformers engine tests). KVC_TEST_JOBS sets it.
ctest --output-on-failure -j "${KVC_TEST_JOBS:-$(( $(nproc) + 1 ))}" "$@"
