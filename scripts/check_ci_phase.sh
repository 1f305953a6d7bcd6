#!/usr/bin/env bash
# .ci/run's phase (scripts/ci_phase.sh) passes its command's failure on however it is called: plainly
# under set -e, tested with ||, and in the background then waited for; and records every phase.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
phases=$(mktemp)
trap 'rm -f "$phases"' EXIT
unset KVC_PHASES KVC_PHASE
# shellcheck source=ci_phase.sh
source "$here/ci_phase.sh"
fail() { echo "check_ci_phase: $*" >&2; exit 1; }
phase ok true >/dev/null || fail "a passing command's phase returned $?"
rc=0; phase tested false >/dev/null || rc=$?
[ "$rc" = 1 ] || fail "a failing command's phase returned $rc under ||, not 1"
rc=0; phase status bash -c 'exit 7' >/dev/null || rc=$?
[ "$rc" = 7 ] || fail "the phase returned $rc, not the command's 7"
phase background false >/dev/null &
rc=0; wait $! || rc=$?
[ "$rc" = 1 ] || fail "a failing command's phase in the background returned $rc, not 1"
out=$(phases="$phases" bash -c 'set -e; source "$1"; phase plain false >/dev/null; echo "not stopped"' _ "$here/ci_phase.sh")
[ -z "$out" ] || fail "set -e did not stop at a failing phase"
[ "$(cut -f1 "$phases" | tr '\n' ' ')" = "ok tested status background plain " ] || fail "recorded phases: $(cut -f1 "$phases" | tr '\n' ' ')"
# part: a script the phase runs records where the phase's seconds went, as "PHASE / PART" rows;
# a part under a second, and a part outside any phase, record nothing.
script=$(mktemp)
trap 'rm -f "$phases" "$script"' EXIT
printf 'source "%s"\npart instant\nsleep 1.1\npart slept\n' "$here/ci_phase.sh" > "$script"
: > "$phases"
phase parted bash "$script" >/dev/null || fail "the parted phase failed"
[ "$(cut -f1 "$phases" | tr '\n' '|')" = "parted / slept|parted|" ] || fail "recorded parts: $(tr '\t\n' ':|' < "$phases")"
[ "$(head -1 "$phases" | cut -f2)" -ge 1 ] || fail "the slept part took $(head -1 "$phases" | cut -f2) s"
: > "$phases"
bash "$script"
[ ! -s "$phases" ] || fail "a part outside a phase was recorded: $(cat "$phases")"
# The third column is the machine's busy CPU while the phase ran: a phase that keeps a core busy for
# two seconds had at least one second of it (other processes can only add to it).
: > "$phases"
phase spin timeout 2 sh -c 'while :; do :; done' >/dev/null || true
cpu=$(cut -f3 "$phases")
[ -n "$cpu" ] && [ "$cpu" -ge 1 ] || fail "a phase that spun a core for 2 s recorded '$cpu' s of CPU"
echo "check_ci_phase: every failing phase fails its caller; all five recorded; parts recorded inside a phase only; CPU counted"
