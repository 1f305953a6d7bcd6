#!/usr/bin/env bash
# The engine matrix: every configuration of engines/engines.json on every model, the fixed plans, in
# two shards on the two cores, then `kvconform site` writes the results as a site (reports/engine-site,
# or the folder given as $KVC_SITE_OUT; docs/cli.md "kvconform site").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/engines.sh --setup-only
start=$(date +%s)
pids=()
for i in 0 1; do
  build/cli/kvconform engine --shard "$i/2" --report-dir "reports/engine-matrix-$i" "$@" \
    > "reports/engine-matrix-$i.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
echo "engine matrix: $(( $(date +%s) - start )) s (exit $status: 1 means a FAIL, which the matrix shows)" >&2
tail -n 2 reports/engine-matrix-0.log reports/engine-matrix-1.log >&2
build/cli/kvconform site reports/engine-matrix-0 reports/engine-matrix-1 --out "${KVC_SITE_OUT:-reports/engine-site}"
