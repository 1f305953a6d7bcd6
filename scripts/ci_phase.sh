# phase NAME COMMAND...: runs COMMAND, then prints and records (in "$phases", a TSV: name, wall
# seconds, the machine's busy CPU seconds meanwhile) how long it took and what CPU it had, and
# returns COMMAND's exit status, also where the caller tests it (`phase ... || rc=$?`) or runs it in
# the background (`phase ... &; wait $!`), where `set -e` does not stop at the failure.
# Sourced by .ci/run, and by the scripts a phase runs for `part`; scripts/check_ci_phase.sh tests both.
phase() {
  local name=$1 start rc=0 cpu
  start=$(date +%s)
  cpu=$(machine_cpu_cs)
  shift
  KVC_PHASES="$(realpath "$phases")" KVC_PHASE="$name" "$@" || rc=$?
  local took=$(( $(date +%s) - start ))
  printf '%s\t%s\t%s\n' "$name" "$took" "$(cpu_since "$cpu")" >> "$phases"
  echo "ci: $name took $took s$([ "$rc" = 0 ] || echo " and FAILED (exit $rc)")"
  return "$rc"
}

# The machine's busy CPU time so far (all cores, every process: user, nice, system, interrupts,
# steal), in hundredths of a second, from /proc/stat; empty where there is none. Machine-wide, because
# the fork servers' children that do most of ctest's work are no phase's descendants: a phase beside
# another (golden --check beside ctest) counts the other's CPU too, and ci_minutes.py says so.
machine_cpu_cs() {
  local _cpu user nice system idle iowait irq softirq steal hz
  [ -r /proc/stat ] || return 0
  read -r _cpu user nice system idle iowait irq softirq steal _ < /proc/stat
  hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
  echo $(( (user + nice + system + irq + softirq + ${steal:-0}) * 100 / hz ))
}
# cpu_since CS: busy CPU seconds since machine_cpu_cs printed CS (empty if either is unknown).
cpu_since() {
  local now
  now=$(machine_cpu_cs)
  [ -n "$1" ] && [ -n "$now" ] && echo $(( (now - $1 + 50) / 100 ))
  return 0
}

# part NAME, in a script a phase runs: the seconds since the script sourced this file (or since its
# last part) went to NAME, recorded as a row "PHASE / NAME" of the phase file, so that the table of
# where CI's minutes go (scripts/ci_minutes.py) can say what inside a phase took them. Outside a
# phase, and for a part that took under a second, nothing is recorded.
_kvc_part_start=$(date +%s%3N)
_kvc_part_cpu=$(machine_cpu_cs)
part() {
  local now
  now=$(date +%s%3N)
  if [ -n "${KVC_PHASES:-}" ] && [ $(( now - _kvc_part_start )) -ge 1000 ]; then
    printf '%s / %s\t%s\t%s\n' "${KVC_PHASE:-?}" "$1" $(( (now - _kvc_part_start + 500) / 1000 )) "$(cpu_since "$_kvc_part_cpu")" >> "$KVC_PHASES"
  fi
  _kvc_part_start=$now
  _kvc_part_cpu=$(machine_cpu_cs)
}
