#!/usr/bin/env bash
# The wheel where its users are (docs/install.md): a fresh venv in a temporary folder with no
# checkout above it installs the built wheel (and torch==2.13.0, its one dependency, from where pip
# finds it), then runs what examples/ci/kvconform.yml runs in an implementation's repository:
#
#   bash scripts/wheel_smoke.sh [WHEEL]     # default: the wheel in dist/ (bash scripts/wheel.sh)
#
#   1. `kvconform run`: the golden replay and the property campaign, from the installed data; every case
#      the checkout lists must pass, and the golden and backend suites close as the checkout's binary
#      does, with the same report bytes (only the packaging moved). The properties run 10 traces each,
#      not 100: the packaging's reach is the same, the campaigns' own is ctest's;
#   2. `kvconform engine --engine-cmd 'python my_engine.py'`: the README's transformers engine
#      (python/examples/hf_engine.py) on one tiny model, written by the installed generator; told a
#      wrong window (--mutant window_off_by_one+1) it must FAIL, and with an expectations file that expects
#      those failures it passes, reporting them as expected;
#   3. `pytest --kvconform` on the README's kernel and `pytest --kvconform-engine` on its engine;
#   4. `kvconform site` over the reports, where this kvconform has it.
# Prints each step's seconds; any failure names its step and exits 1. KVC_SMOKE_KEEP=1 keeps the folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheel="${1:-}"
if [ -z "$wheel" ]; then
  wheels=("$root"/dist/kvconform-*.whl)
  [ -f "${wheels[0]}" ] || { echo "wheel-smoke: no wheel in dist/: run bash scripts/wheel.sh first" >&2; exit 1; }
  wheel="${wheels[0]}"
fi
wheel="$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")"
checkout_bin="$root/build/cli/kvconform"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvconform-wheel-smoke.XXXXXX")"
[ "${KVC_SMOKE_KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
fail() { echo "wheel-smoke: FAILED ($1)" >&2; exit 1; }
clock() { date +%s.%N; }
took() { awk -v a="$2" -v b="$(clock)" -v what="$1" 'BEGIN { printf "wheel-smoke: %-36s %6.1f s\n", what, b - a }'; }

# The venv: the wheel, the transformers release the example engine runs on, and pytest, with the
# project's installer (scripts/venv.sh: uv, pinned, else pip), byte-compiling nothing.
t=$(clock)
source "$root/scripts/venv.sh"
make_venv python3 "$tmp/venv" "$wheel" -r "$root/golden/requirements-5.24.0.txt" -r "$root/python/requirements-test.txt" \
  > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "install"; }
took "install (wheel, torch, transformers)" "$t"
export PATH="$tmp/venv/bin:$PATH"
unset PYTHONPATH KVCONFORM_BIN KVCONFORM_ROOT
mkdir -p "$tmp/work"
cd "$tmp/work"
cp "$root/python/examples/hf_engine.py" my_engine.py
cp "$root/python/examples/sdpa_kernel.py" attention.py
for d in "$root" "$root/build"; do
  case "$PWD/" in "$d"/*) fail "the smoke folder $PWD is inside the checkout" ;; esac
done
[ "$(command -v kvconform)" = "$tmp/venv/bin/kvconform" ] || fail "kvconform on PATH is $(command -v kvconform), not the venv's entry point"
installed_bin="$(python -c 'import kvconform.binary as b; print(b.PACKAGED)')"
[ -x "$installed_bin" ] || fail "the wheel installed no binary at $installed_bin"
# The wheel's binaries record no checkout (harness/paths under SKBUILD): none of them may look for its
# data, corpus or Python package in the tree it was built in, which this run has beside it.
for b in "$installed_bin" "$installed_bin-libtorch"; do
  ! grep -qaP "\x00\Q$root\E/?\x00" "$b" || fail "$b records the checkout it was built in ($root)"
done

# 1. The default run, from the installed data: every case the checkout's binary lists, all passing.
t=$(clock)
out="$(kvconform run --iterations 10 --report-dir reports/run 2>&1)" || { echo "$out" | tail -30; fail "kvconform run"; }
took "kvconform run" "$t"
closing="$(echo "$out" | tail -1)"
echo "  $closing"
case "$out" in *"$root"*) echo "$out" | grep -F "$root" | head -5; fail "kvconform run names the checkout $root" ;; esac
# The checkout's binary beside it, without running the property campaign twice (ctest runs the
# checkout's own default run): the installed run's case count is the one the checkout lists, and on the
# golden replay and the backend suite both binaries close alike and write the same report bytes once
# each binary's own path is named alike (a run's command line records it).
if [ -x "$checkout_bin" ]; then
  cases="$("$checkout_bin" run --list | wc -l)"
  echo "$closing" | grep -Eq "^$cases passed, 0 failed, 0 skipped" \
    || fail "kvconform run closed with '$closing'; the checkout's binary lists $cases cases, all to pass"
  mkdir -p "$tmp/checkout-run"
  replay=(run --suite golden,backend --report-dir reports/replay)
  mine="$(kvconform "${replay[@]}" 2>&1 | tail -1)" || true
  expected="$(cd "$tmp/checkout-run" && "$checkout_bin" "${replay[@]}" 2>&1 | tail -1)" || true
  [ "$mine" = "$expected" ] || fail "kvconform run --suite golden,backend closed with '$mine', the checkout's binary with '$expected'"
  for f in summary.json junit.xml summary.md report.html; do
    cmp -s <(sed "s#$installed_bin#KVCONFORM#g" "reports/replay/$f") <(sed "s#$checkout_bin#KVCONFORM#g" "$tmp/checkout-run/reports/replay/$f") \
      || { diff <(sed "s#$installed_bin#KVCONFORM#g" "reports/replay/$f") <(sed "s#$checkout_bin#KVCONFORM#g" "$tmp/checkout-run/reports/replay/$f") | head -20
           fail "reports/replay/$f differs from the checkout binary's beyond the binary's path"; }
  done
  echo "  the checkout's binary: $cases cases listed; golden and backend suites with the same closing line and report bytes"
else
  echo "wheel-smoke: no checkout binary at $checkout_bin: the case count and reports were not compared"
fi

# 2. An engine of one's own, on the tiny models the installed generator writes into ./build/engine-models.
engine=(--engine-cmd 'python my_engine.py' --engine-name mine --model '^mistral-w5$' --filter 'two_sequences|extend_after_full')
# The implementation's own expectations file (docs/expectations.md), as an engine team keeps it; on
# the correct engine its entry is an unexpected pass, which without --strict-expectations is a warning
# and not a failure (one run shows both that the engine passes and that).
cat > expectations.jsonc <<'EOF'
// What this engine is expected to fail (docs/expectations.md).
{"expectations": [
  {
    "case": "^engine/mine/mistral-w5/(two_sequences|extend_after_full)$",
    "outcome": "fail",
    "diagnosis": "window_off_by_one",
    "reason": "the engine's window is one token wider than the model's (the smoke's own bug)"
  }
]}
EOF
t=$(clock)
out="$(kvconform engine "${engine[@]}" --expectations expectations.jsonc --report-dir reports/engine 2>&1)" \
  || { echo "$out" | tail -30; fail "kvconform engine (an unexpected pass fails the run without --strict-expectations?)"; }
took "kvconform engine" "$t"
echo "$out" | tail -1 | sed 's/^/  /'
echo "$out" | tail -1 | grep -Eq '^[1-9][0-9]* passed, 0 failed' || fail "kvconform engine did not pass: $(echo "$out" | tail -1)"
grep -q "expectations: warning: .*unexpected pass" <<<"$out" || { echo "$out" | tail -10; fail "the correct engine's unexpected pass was not reported"; }
t=$(clock)
out="$(kvconform engine "${engine[@]}" --mutant window_off_by_one+1 --no-report 2>&1)" && { echo "$out" | tail -5; fail "kvconform engine --mutant window_off_by_one+1 passed"; }
took "kvconform engine --mutant window_off_by_one+1" "$t"
grep -q 'FAIL step' <<<"$out" || { echo "$out" | tail -10; fail "kvconform engine --mutant window_off_by_one+1 named no failing step"; }
# The expectations file again: an engine with a bug of its own (its window one token wider, the suite
# not told) passes with the file, its failures reported as expected; the same file on the correct
# engine fails the run under --strict-expectations. (A --mutant run is never excused.) Its cases
# reported as expected failures are cases it failed, so it is not run again without the file (the run
# above under --mutant window_off_by_one+1 loads the same window and failed, naming the step).
cat > buggy_engine.py <<'EOF'
import kvconform
from my_engine import HFEngine


class BuggyEngine(HFEngine):
    name = "hf-buggy"

    def load(self, model_dir, options, mutant, max_tokens, sequences):  # its own bug: a window one wider
        return super().load(model_dir, options, "window_off_by_one+1" if mutant == "none" else mutant, max_tokens, sequences)


if __name__ == "__main__":
    kvconform.serve_engine(BuggyEngine())
EOF
buggy=(--engine-cmd 'python buggy_engine.py' --engine-name mine --model '^mistral-w5$' --filter 'two_sequences|extend_after_full')
t=$(clock)
out="$(kvconform engine "${buggy[@]}" --expectations expectations.jsonc --report-dir reports/expected 2>&1)" \
  || { echo "$out" | tail -20; fail "kvconform engine --expectations: the expected failures failed the run"; }
grep -q "expected failure (expectations.jsonc:" <<<"$out" || { echo "$out" | tail -10; fail "no case was reported as an expected failure"; }
out="$(kvconform engine "${engine[@]}" --expectations expectations.jsonc --strict-expectations --no-report 2>&1)" \
  && { echo "$out" | tail -10; fail "an unexpected pass did not fail the run under --strict-expectations"; }
took "kvconform engine --expectations" "$t"
echo "  expected failures reported as such; an unexpected pass fails under --strict-expectations"

# 3. The pytest plugin on the README's kernel and engine (a few cases each: the plugin's own tests
# in the checkout go through all of them).
t=$(clock)
pytest -q -p no:cacheprovider --kvconform --kvconform-adapter attention.py:sdpa_flash \
  --kvconform-filter 'decode_across_window/static' > pytest-kernel.log 2>&1 || { tail -30 pytest-kernel.log; fail "pytest --kvconform"; }
took "pytest --kvconform" "$t"
tail -1 pytest-kernel.log | sed 's/^/  /'
grep -Eq '[1-9][0-9]* passed' pytest-kernel.log || fail "pytest --kvconform passed no test"
t=$(clock)
pytest -q -p no:cacheprovider --kvconform-engine my_engine.py:HFEngine --kvconform-engine-args '--model ^mistral-w5$' \
  --kvconform-filter 'two_sequences' > pytest-engine.log 2>&1 || { tail -30 pytest-engine.log; fail "pytest --kvconform-engine"; }
took "pytest --kvconform-engine" "$t"
tail -1 pytest-engine.log | sed 's/^/  /'
grep -Eq '[1-9][0-9]* passed' pytest-engine.log || fail "pytest --kvconform-engine passed no test"

# 4. The reports as a site, as an implementation's CI uploads them.
if kvconform --help 2>&1 | grep -qE '^ +site\b'; then
  t=$(clock)
  kvconform site reports/run reports/engine --out site > site.log 2>&1 || { tail -20 site.log; fail "kvconform site"; }
  took "kvconform site" "$t"
  [ -f site/index.html ] || fail "kvconform site wrote no site/index.html"
fi
echo "wheel-smoke: OK ($(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB)"
