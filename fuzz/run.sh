#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++, ASan + UBSan, in build-fuzz/) and runs each from the seed
# corpus (fuzz/make_corpus.sh) for SECONDS (default 25). A crash, a leak, a sanitizer report, an
# uncaught exception or an input slower than 10 s fails the run; its input is left in
# build-fuzz/artifacts/. CI runs the short default (.ci/run); docs/reliability.md has the long runs.
#   fuzz/run.sh [SECONDS] [TARGET...]     e.g. fuzz/run.sh 600 case_fuzz
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-25}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(case_fuzz fixture_fuzz plugin_wire_fuzz)
# Debian 12's clang is 14; libFuzzer's runtime is in libclang-rt-14-dev.
missing=()
for p in clang libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}" >&2
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi
build="$root/build-fuzz"
if [ ! -f "$build/CMakeCache.txt" ]; then
  prefix="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  # ccache through the project's own launcher (CMakeLists.txt): its base directory is what lets a
  # fresh clone elsewhere hit what an earlier one compiled
  cmake -S . -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER=clang++ -DKVC_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >/dev/null
bash fuzz/make_corpus.sh "$build/seeds" >/dev/null
mkdir -p "$build/artifacts"
declare -A seeds=([case_fuzz]=case [fixture_fuzz]=fixture [plugin_wire_fuzz]=plugin_wire)
# Fixture inputs stay small: parsing dominates, and the checks are per field, not per byte.
declare -A max_len=([case_fuzz]=65536 [fixture_fuzz]=8192 [plugin_wire_fuzz]=65536)
for t in "${targets[@]}"; do
  # New inputs go to a scratch corpus: the seeds stay as the repository made them.
  work="$build/corpus/$t"
  mkdir -p "$work"
  log="$build/$t.log"
  start=$(date +%s)
  if ! "$build/fuzz/$t" "$work" "$build/seeds/${seeds[$t]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="${max_len[$t]}" -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $t FAILED after $(( $(date +%s) - start )) s (input in $build/artifacts/, log $log)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz: $t: $execs executions in $(( $(date +%s) - start )) s, no crash, hang or sanitizer report"
done
