#!/usr/bin/env bash
# What the per-case ctests cost, batched as ctest runs them now (one `kvconform run --case-results`
# per slice, cli/discover_cases.cmake.in) beside one process per case (`kvconform run
# --filter '^ID$'` for every id, what each case/<id> test ran before), side by side in one run.
#
#   bash scripts/bench_case_tests.sh [JOBS] [EVERY]   # defaults: nproc jobs, every case
#
# EVERY=k times one case in k the process-per-case way and scales the time by k (the cases' costs
# are spread evenly over the list). Needs a built tree (scripts/setup.sh). Prints one line per way
# and their ratio.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${1:-$(nproc)}"
every="${2:-1}"
bin="$root/build/cli/kvconform"
cd "$root"
ids="$(mktemp)"
trap 'rm -f "$ids"' EXIT
"$bin" run --list --suite golden,backend > "$ids"
n=$(wc -l < "$ids")
now() { date +%s.%N; }

t0=$(now)
(cd build && ctest -L case -j "$jobs" > /dev/null)
t1=$(now)
batched=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')

sample="$(mktemp)"
awk -v k="$every" 'NR % k == 0' "$ids" > "$sample"
m=$(wc -l < "$sample")
t0=$(now)
# Each id as an exact regular expression, the way the per-case tests quoted it.
sed -e 's/[][\\.^$*+?(){}|]/\\&/g' -e 's/^/^/' -e 's/$/$/' "$sample" |
  xargs -d '\n' -P "$jobs" -I{} "$bin" run --no-report --filter {} > /dev/null
t1=$(now)
rm -f "$sample"
per_case=$(awk -v a="$t0" -v b="$t1" -v n="$n" -v m="$m" 'BEGIN { print (b - a) * n / m }')

printf 'cases: %d, jobs: %d, load before: %s\n' "$n" "$jobs" "$(cut -d' ' -f1 /proc/loadavg)"
printf 'batched (ctest -L case):          %7.1f s\n' "$batched"
printf 'one process per case (%d of %d timed): %7.1f s\n' "$m" "$n" "$per_case"
awk -v p="$per_case" -v b="$batched" 'BEGIN { printf "ratio: %.1fx\n", p / b }'
