#!/usr/bin/env bash
# `kvconform` is a launcher without LibTorch (cli/app.h): engine and merge run in it, every other
# subcommand in kvconform-libtorch beside it. Checks that it links no LibTorch, that what it hands
# over behaves as kvconform (version, exit codes, reproduce lines naming the launcher), and that a
# launcher without its sibling says so (exit 2). ctest cli_launcher.
set -u
bin=$1
dir=$(dirname "$bin")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

if ldd "$bin" | grep -E 'lib(torch|c10)'; then fail "$bin links LibTorch"; fi
ldd "$dir/kvconform-libtorch" | grep -q libtorch_cpu || fail "$dir/kvconform-libtorch does not link LibTorch (is this the pair?)"
[ "$("$bin" --version)" = "$("$dir/kvconform-libtorch" --version)" ] || fail "--version differs between the two binaries"
"$bin" merge --help | grep -q 'Usage: .* merge' || fail "merge --help in the launcher"
"$bin" run --no-such-flag >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "run --no-such-flag through the launcher exits $rc, not 2"
out=$("$bin" run --iterations 5 --mutant capacity_max --property stored_rows --filter '^property/' --no-report 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a mutant run through the launcher exits $rc, not 1"
grep -q "reproduce: $bin run " <<<"$out" ||
  fail "the reproduce line does not name the launcher $bin: $(grep -m1 reproduce: <<<"$out")"
cp "$bin" "$work/kvconform"
out=$("$work/kvconform" run --help 2>&1); rc=$?
[ $rc -eq 2 ] || fail "a launcher without kvconform-libtorch exits $rc, not 2"
grep -q "cannot run $work/kvconform-libtorch" <<<"$out" || fail "a launcher without kvconform-libtorch says: $out"
[ $status -eq 0 ] && echo "cli_launcher: the launcher links no LibTorch and hands over run, exit codes and reproduce lines"
exit $status
