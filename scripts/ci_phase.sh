# phase NAME COMMAND...: runs COMMAND, then prints and records (in "$phases", a TSV) how long it took,
# and returns COMMAND's exit status, also where the caller tests it (`phase ... || rc=$?`) or runs
# it in the background (`phase ... &; wait $!`), where `set -e` does not stop at the failure.
# Sourced by .ci/run, and by the scripts a phase runs for `part`; scripts/check_ci_phase.sh tests both.
phase() {
  local name=$1 start rc=0
  start=$(date +%s)
  shift
  KVC_PHASES="$(realpath "$phases")" KVC_PHASE="$name" "$@" || rc=$?
  local took=$(( $(date +%s) - start ))
  printf '%s\t%s\n' "$name" "$took" >> "$phases"
  echo "ci: $name took $took s$([ "$rc" = 0 ] || echo " and FAILED (exit $rc)")"
  return "$rc"
}

# part NAME, in a script a phase runs: the seconds since the script sourced this file (or since its
# last part) went to NAME, recorded as a row "PHASE / NAME" of the phase file, so that the table of
# where CI's minutes go (scripts/ci_minutes.py) can say what inside a phase took them. Outside a
# phase, and for a part that took under a second, nothing is recorded.
_kvc_part_start=$(date +%s%3N)
part() {
  local now
  now=$(date +%s%3N)
  if [ -n "${KVC_PHASES:-}" ] && [ $(( now - _kvc_part_start )) -ge 1000 ]; then
    printf '%s / %s\t%s\n' "${KVC_PHASE:-?}" "$1" $(( (now - _kvc_part_start + 500) / 1000 )) >> "$KVC_PHASES"
  fi
  _kvc_part_start=$now
}
