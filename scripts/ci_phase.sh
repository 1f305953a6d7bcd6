# phase NAME COMMAND...: runs COMMAND, then prints and records (in "$phases", a TSV) how long it took,
# and returns COMMAND's exit status, also where the caller tests it (`phase ... || rc=$?`) or runs
# it in the background (`phase ... &; wait $!`), where `set -e` does not stop at the failure.
# Sourced by .ci/run; scripts/check_ci_phase.sh tests it.
phase() {
  local name=$1 start rc=0
  start=$(date +%s)
  shift
  "$@" || rc=$?
  local took=$(( $(date +%s) - start ))
  printf '%s\t%s\n' "$name" "$took" >> "$phases"
  echo "ci: $name took $took s$([ "$rc" = 0 ] || echo " and FAILED (exit $rc)")"
  return "$rc"
}
