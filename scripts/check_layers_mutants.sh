#!/usr/bin/env bash
# check_layers.sh can fail: each layering rule is broken in a copy of the sources and the script must
# exit 1 naming every break (ctest layers_check_catches_mutants). The copy holds only the folders the
# script reads, so this takes seconds.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

fresh() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree/scripts"
  (cd "$root" && tar cf - --exclude='.venv*' harness generators plugins examples fuzz cli) | tar xf - -C "$work/tree"
  cp "$root/scripts/check_layers.sh" "$work/tree/scripts/"
}
fresh
out=$(bash "$work/tree/scripts/check_layers.sh" 2>&1) || { echo "the unmutated copy fails: $out"; exit 1; }

# Every rule broken at once, in different files: each break must be named on its own line, so one
# run shows all of them (a rule's check goes on past its first offence).
t=$work/tree
sed -i 's|add_library(kvc_reference STATIC |add_library(kvc_reference STATIC src/core/types.cpp |' "$t/harness/CMakeLists.txt"
mkdir "$t/harness/src/stray"; echo 'int stray() { return 0; }' > "$t/harness/src/stray/stray.cpp"
echo '#include <kvcgen/scenario.h>' >> "$t/harness/src/reference/masks.cpp"
echo '#include "../../cli/cli_util.h"' >> "$t/generators/src/corpus.cpp"
echo '#include <kvconform/report.h>' >> "$t/harness/src/core/scenario.cpp"
echo '#include <ATen/ATen.h>' >> "$t/harness/src/worker/worker.cpp"
echo '#include <ATen/ATen.h>' >> "$t/harness/src/engine/model.cpp"
echo '#include <ATen/ATen.h>' >> "$t/cli/merge_command.cpp"
echo '#include <kvconform/types.h>' >> "$t/plugins/ring_buffer/ring_buffer.cpp"
echo 'namespace rc { namespace detail {} }  // rc::detail' >> "$t/generators/src/search.cpp"
out=$(bash "$t/scripts/check_layers.sh" 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "MISSED: the mutated copy exits $rc, not 1"; status=1; }
# expect RULE PATTERN WHAT: a line starting with "RULE: " and matching PATTERN.
expect() {
  if grep -E "^$1: .*$2" <<<"$out" | head -1 | grep -q .; then
    echo "caught $1 ($3): $(grep -m1 -E "^$1: .*$2" <<<"$out")"
  else
    echo "MISSED $1 ($3)"; status=1
  fi
}
expect L0 "core/types.cpp is compiled by kvc_reference" "a core source compiled by kvc_reference"
expect L0 "src/stray/ is no library" "a folder that is no library"
expect L1 "reference/masks.cpp.*kvcgen" "the library includes the generators"
expect L2 "generators/src/corpus.cpp.*cli/cli_util.h" "a generator includes the CLI"
expect L3 "core/scenario.cpp reaches .*report.h" "core includes the reports"
expect L4 "worker/worker.cpp reaches .*ATen" "the worker includes LibTorch"
expect L4 "engine/model.cpp reaches .*ATen" "the model oracle includes LibTorch"
expect L4 "cli/merge_command.cpp reaches .*ATen" "the kvconform launcher includes LibTorch"
expect L5 "ring_buffer.cpp.*kvconform/types.h" "a plugin includes the library"
expect L6 "generators/src/search.cpp" "rc::detail outside its adapter"
[ $status -eq 0 ] || { echo "--- check_layers.sh printed:"; echo "$out"; }
exit $status
