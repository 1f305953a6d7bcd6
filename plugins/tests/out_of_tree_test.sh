#!/usr/bin/env bash
# plugin_out_of_tree_example (ctest, label plugin): kvconform as a user gets it. Installs the build
# into a fresh prefix, configures and builds an out-of-tree plugin project against it with
# find_package(kvconform), then checks that plugin with the installed CLI (exit 0 expected).
#   out_of_tree_test.sh <kvconform build dir> <plugin project dir> <scratch dir> <cases dir> <plugins> [cmake args]
# <plugins>: comma-separated target names to check (each must pass), e.g. naive_attention
# (the CLI replays the step sequences of <cases dir>, kvconform's cases/; its default is ./cases)
set -euo pipefail
build="$1" project="$2" work="$3" cases="$4" names="$5"
shift 5
rm -rf "$work"
trap 'tail -n 30 "$work"/*.log >&2' ERR
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -x "$work/prefix/bin/kvconform"
test -f "$work/prefix/include/kvconform/plugin_abi.h"
cmake -S "$project" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release "$@" > "$work/configure.log"
# Only the plugins it checks: the in-tree build compiles the project's other targets (mutants).
cmake --build "$work/build" -j 2 --target ${names//,/ } > "$work/build.log"
# The installed CLI must run from its prefix alone (its RPATH, not the build tree).
for name in ${names//,/ }; do
  "$work/prefix/bin/kvconform" run --plugin "$work/build/$name.so" --cases "$cases" \
    --plugin-iterations "${KVC_PLUGIN_ITERATIONS:-10}" --no-report
done
