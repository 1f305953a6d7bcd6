#!/usr/bin/env bash
# Same cases and seeds, two kvconform binaries: do they give the same verdicts and the same report
# bytes? Used for refactors (one StepDriver, one mask request, the folders), to show they changed no
# result.
#   bash scripts/compare_reports.sh OLD_BINARY NEW_BINARY [PLUGIN_DIR] [OLD_ORACLE_ENGINE NEW_ORACLE_ENGINE]
# Runs the default run, two --mutant runs and (with PLUGIN_DIR, e.g. build/plugins; "" for none) four
# plugin checks with each binary, and (with each binary's kvc-oracle-engine) the engine level: the
# oracle engine's fixed and random plans, window, operation and config mutants (each binary with its
# own worker, named oracle, so the case ids are the suite's), and a model campaign that shrinks; then
# compares junit.xml, summary.json, summary.md, report.html and stdout
# after removing the report folder's own path, the build id (summary.json run.build: each binary
# has its own) and RapidCheck's source:line of a failing RC_FAIL
# (which moves with any edit of the file). When files differ, it also says per run whether the
# verdicts are identical and which cases' records changed (for a deliberate change of behaviour).
set -uo pipefail
old=$1 new=$2 plugins=${3:-} old_oracle=${4:-} new_oracle=${5:-}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
runs=(default "mutant_window --mutant window_too_wide" "mutant_kvoff --mutant kv_offset_too_small --suite golden,backend")
# KVC_COMPARE_LEVEL=engine compares the engine runs alone (a change to the engine level only).
[ "${KVC_COMPARE_LEVEL:-}" = engine ] && runs=()
if [ -n "$plugins" ]; then
  for p in ring_buffer mutant_wrap_order mutant_window_off_by_one mutant_stale_kv_offset; do
    runs+=("plugin_$p --plugin $plugins/$p.so")
  done
fi
if [ -n "$old_oracle" ]; then
  # "engine" runs; @ORACLE@ is each side's own worker. --iterations 5 draws plans with every operation.
  e="engine --engine-cmd @ORACLE@ --engine-name oracle"
  runs+=("engine_oracle $e --plans all --iterations 5"
         "engine_window $e --mutant window+1"
         "engine_fork $e --mutant fork-prefix --plans all --iterations 5"
         "engine_spec $e --mutant spec-rollback --plans all --iterations 5"
         "engine_shift $e --mutant shift-no-rerotate --plans all --iterations 5"
         "engine_chunked $e --mutant chunked-restart"
         "engine_batch $e --mutant batch-offset --model ^gemma2-w4$"
         "engine_glitch $e --mutant glitch --model ^gemma2-w4$"
         "engine_models $e --mutant window+1 --plans models --family ^gemma2$ --iterations 3 --campaign-models $work/models")
fi
for side in old new; do
  bin=${!side}
  oracle_var=${side}_oracle
  for r in "${runs[@]}"; do
    name=${r%% *}; args=${r#"$name"}
    case "$args" in " engine "*) args=${args//@ORACLE@/${!oracle_var}} ;; *) args=" run$args" ;; esac
    # shellcheck disable=SC2086
    "$bin" $args --report-dir "$work/out/$name" >"$work/$side.$name.stdout" 2>/dev/null
    echo "$name exit $?" >>"$work/$side.exits"
    mv "$work/out/$name" "$work/$side.$name"
  done
done
# The binaries' own paths appear in reproduce lines: both become KVCONFORM; a RapidCheck failure
# names its source file by the checkout's absolute path, which differs between two checkouts.
old_abs=$(realpath "$old") new_abs=$(realpath "$new")
# Each side's oracle engine (its path, as given and absolute) becomes ORACLE.
workers=()
for w in "$old_oracle" "$new_oracle"; do [ -n "$w" ] && workers+=(-e "s#$(realpath "$w")#ORACLE#g" -e "s#$w#ORACLE#g"); done
norm() { sed -E "${workers[@]}" -e "s#$work/out/##g; s#\"build\": \"[^\"]*\"#\"build\": \"BUILD\"#g; s#(\\.cpp):[0-9]+:#\\1:N:#g; s#$old_abs#KVCONFORM#g; s#$new_abs#KVCONFORM#g; s#[^ ]*/((generators|harness)/src/)#\\1#g" "$1"; }
same=0 differ=0
cmp -s "$work/old.exits" "$work/new.exits" || { echo "exit codes differ:"; diff "$work/old.exits" "$work/new.exits"; differ=$((differ + 1)); }
for r in "${runs[@]}"; do
  name=${r%% *}
  for f in "$name/junit.xml" "$name/summary.json" "$name/summary.md" "$name/report.html" "$name.stdout"; do
    a="$work/old.${f}" b="$work/new.${f}"
    if cmp -s <(norm "$a") <(norm "$b"); then same=$((same + 1)); else differ=$((differ + 1)); echo "differs: $f"; fi
  done
done
echo "$same identical, $differ different (files in $work)"
if [ "$differ" -gt 0 ]; then
  # For a deliberate change of behaviour: are the verdicts still the same, and which cases' records
  # (after the same normalisation) changed?
  for r in "${runs[@]}"; do
    name=${r%% *}
    python3 - "$work/old.$name/summary.json" "$work/new.$name/summary.json" "$name" "$old_abs" "$new_abs" "$old_oracle" "$new_oracle" <<'PY'
import json, os, re, sys
old, new, name, old_bin, new_bin, *workers = sys.argv[1:]
def same(v):
    for w in [w for w in workers if w] + [os.path.realpath(w) for w in workers if w]:
        v = v.replace(w, "ORACLE")
    return v.replace(old_bin, "KVCONFORM").replace(new_bin, "KVCONFORM")
def cases(path):
    out = {}
    for c in json.load(open(path))["cases"]:
        c = {k: re.sub(r"(\.cpp):[0-9]+:", r"\1:N:", same(v)) if isinstance(v, str) else v for k, v in c.items()}
        out[c["id"]] = c
    return out
a, b = cases(old), cases(new)
verdicts = "identical" if {k: v["status"] for k, v in a.items()} == {k: v["status"] for k, v in b.items()} else "DIFFER"
changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
print(f"{name}: {len(a)} cases, verdicts {verdicts}; records changed: {', '.join(changed) or 'none'}")
PY
  done
fi
[ "$differ" -eq 0 ]
