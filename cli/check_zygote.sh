#!/usr/bin/env bash
# KVC_ZYGOTE=1: the launcher hands LibTorch runs to a kvconform-libtorch fork server (zygote.h).
# Checks that a served run is the run kvconform would be alone (output, exit codes, working
# directory, environment), that it is served (a child of the server), that a killed or
# signalled launcher takes its run with it, that a rebuilt binary or another environment gets
# another server, and that nothing is served without KVC_ZYGOTE=1. ctest cli_zygote.
set -u
bin=$1
work=$(mktemp -d /tmp/kvc-zygote-check.XXXXXX)  # short: a socket path has a limit
status=0
fail() { echo "FAIL: $*"; status=1; }
servers() { pgrep -f -- "--zygote-serve $work/" | sort; }
cleanup() { pkill -f -- "--zygote-serve $work/"; rm -rf "$work"; }
trap cleanup EXIT
# A copy of the pair, whose time this check may change.
mkdir -p "$work/bin"
cp "$bin" "$work/bin/kvconform"
cp "$(dirname "$bin")/kvconform-libtorch" "$work/bin/kvconform-libtorch"
kvc=$work/bin/kvconform
unset XDG_RUNTIME_DIR
export KVC_CACHE=$work/cache KVC_SEED=8

# Alone, then served twice: the same bytes but for timings and folder names.
norm() { grep -v '^reports:' "$1" | sed -E 's/[0-9]+(\.[0-9]+)? ?(s|ms)\b/T/g'; }
cmd=(run --suite property --property 'rows$' --iterations 3)
KVC_ZYGOTE=0 "$kvc" "${cmd[@]}" --report-dir "$work/alone" >"$work/alone.out" 2>&1 || fail "alone: exit $?"
[ -e "$work/cache/zygote" ] && [ -n "$(ls "$work/cache/zygote")" ] && fail "KVC_ZYGOTE=0 made a server"
export KVC_ZYGOTE=1
for i in 1 2; do
  (mkdir -p "$work/cwd$i" && cd "$work/cwd$i" && "$kvc" "${cmd[@]}" --report-dir served >"$work/served$i.out" 2>&1) || fail "served $i: exit $?"
  [ -f "$work/cwd$i/served/summary.json" ] || fail "served $i: no report in its working directory"
  diff <(norm "$work/alone.out") <(norm "$work/served$i.out") >/dev/null || fail "served $i prints otherwise: $(diff <(norm "$work/alone.out") <(norm "$work/served$i.out") | head -5)"
done
grep -q '"seed": 8,' "$work/cwd2/served/summary.json" || fail "the served run did not read KVC_SEED from the launcher's environment"
[ "$(servers | wc -l)" = 1 ] || fail "expected one server, found: $(servers | tr '\n' ' ')"
server=$(servers | head -1)
"$kvc" run --no-such-flag >"$work/usage.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "no-such-flag" "$work/usage.out" || fail "bad usage served: exit $rc, $(head -2 "$work/usage.out")"
"$kvc" run --iterations 5 --mutant capacity_max --property stored_rows --filter '^property/' --no-report >"$work/mutant.out" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "a failing run served exits $rc, not 1"
grep -q "reproduce: $kvc run " "$work/mutant.out" || fail "the served reproduce line does not name the launcher: $(grep -m1 reproduce: "$work/mutant.out")"
[ "$("$kvc" --version)" = "$(KVC_ZYGOTE=0 "$kvc" --version)" ] || fail "--version served differs"
# What the run's own processes see: variables that differ per test (not in the server's key) and
# the launcher's limits, through a worker that writes them down.
# kvconform's own variables (KVC_*) are of the run too: tests set them per run.
for v in one two; do
  (ulimit -n 200
   PYTEST_CURRENT_TEST=$v KVC_FAULT_DIR=/$v "$kvc" run --backend-cmd "echo \"\$PYTEST_CURRENT_TEST \$KVC_FAULT_DIR \$(ulimit -n)\" > $work/seen; exit 1" \
     --filter kernel/decode_across_window --no-report >/dev/null 2>&1)
  [ "$(cat "$work/seen" 2>/dev/null)" = "$v /$v 200" ] || fail "the served run's worker saw '$(cat "$work/seen" 2>/dev/null)', not '$v /$v 200'"
done
[ "$(servers | wc -l)" = 1 ] || fail "a variable that changes per test started another server"

# A long run is a child of the server; killing the launcher (SIGKILL, SIGTERM) ends it.
long=(fuzz --time-budget 60 --property stored_rows --no-write --report-dir "$work/long")
for sig in KILL TERM; do
  "$kvc" "${long[@]}" >/dev/null 2>&1 &
  launcher=$!
  for _ in $(seq 100); do child=$(pgrep -P "$server" | head -1); [ -n "$child" ] && break; sleep 0.1; done
  if [ -z "$child" ]; then fail "SIG$sig: the long run is no child of the server"; kill -KILL $launcher; wait $launcher; continue; fi
  kill -$sig $launcher
  wait $launcher; rc=$?
  [ $sig = TERM ] && [ $rc -ne 143 ] && fail "SIGTERM: the launcher exits $rc, not 143 (the run's SIGTERM)"
  for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$child" 2>/dev/null && { fail "SIG$sig to the launcher left its run $child running"; kill -KILL "$child"; }
done

# Another environment, or a rebuilt binary: another server.
X_ZYGOTE_CHECK=1 "$kvc" --version >/dev/null
[ "$(servers | wc -l)" = 2 ] || fail "another environment did not get its own server"
touch "$work/bin/kvconform-libtorch"
"$kvc" --version >/dev/null
[ "$(servers | wc -l)" = 3 ] || fail "a rebuilt kvconform-libtorch did not get its own server"
[ $status -eq 0 ] && echo "cli_zygote: served runs are their own runs; signals, a rebuilt binary and another environment are honoured"
exit $status
