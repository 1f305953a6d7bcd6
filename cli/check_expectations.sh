#!/usr/bin/env bash
# ctest cli_expectations (docs/expectations.md): `kvconform engine` and `kvconform run` with an
# implementation's expectations file, each check with the mutant it catches:
#   - an expected failure is a DEVIATION naming the entry and exits 0; the same file expecting another
#     diagnosis (or none given) leaves it a FAIL, exit 1;
#   - an entry whose cases pass is an unexpected pass: a warning and exit 0, exit 1 under
#     --strict-expectations, and marked in summary.json;
#   - an entry that matches no case is a warning naming file, line and pattern;
#   - --update-expectations adds the new failure (after which the run passes), then drops the entry
#     once the engine is fixed, keeping the other entries and comments as written;
#   - a "skip" entry is not run;
#   - a malformed file is exit 2 naming file, line, field and value, with no report written;
#   - the old --known flag still works, with a warning.
# Usage: check_expectations.sh KVCONFORM ORACLE_ENGINE MODELS_DIR
set -uo pipefail
kvc="$(realpath "$1")" oracle="$(realpath "$2")" models="$(realpath -m "$3")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fails=0
check() {  # check WHAT EXPECTED_EXIT COMMAND... ; the output in $out
  local what="$1" want="$2"
  shift 2
  out="$("$@" 2>&1)"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"
    echo "$out" | tail -30
    fails=$((fails + 1))
  fi
}
has() {  # has WHAT TEXT: $out contains TEXT
  if ! grep -qF -- "$2" <<<"$out"; then
    echo "FAIL: $1: the output lacks: $2"
    echo "$out" | tail -30
    fails=$((fails + 1))
  fi
}
lacks() {
  if grep -qF -- "$2" <<<"$out"; then
    echo "FAIL: $1: the output has: $2"
    echo "$out" | tail -30
    fails=$((fails + 1))
  fi
}

# The oracle engine with its own window one too wide (its "deviate" option: the suite is not told),
# on one model and plan: a FAIL diagnosed window_off_by_one(delta=1).
engine=(engine --engine-cmd "$oracle" --engine-name mine --models "$models" --model '^gemma2-w4$' --filter '/extend_after_full$'
        --no-regressions --report-dir "$work/reports")
wrong=("${engine[@]}" --engine-options '{"deviate": "window_off_by_one+1"}')
expect_file() {  # expect_file NAME DIAGNOSIS: one entry expecting the case to fail with it
  cat >"$work/$1" <<EOF
// mine's known failures
{
  "expectations": [
    // the engine reads its window one too wide
    {
      "case": "^engine/mine/gemma2-w4/extend_after_full\$",
      "outcome": "fail",
      "diagnosis": $2,
      "reason": "window one too wide",
      "link": "https://example.org/mine/1"
    },
    {
      "case": "^engine/mine/no-such-model/",
      "outcome": "fail",
      "reason": "never matches"
    }
  ]
}
EOF
}
expect_file right.jsonc '{"kind": "window_off_by_one", "delta": 1}'
expect_file other.jsonc '"full_attention_on_sliding"'

check "the wrong engine without expectations" 1 "$kvc" "${wrong[@]}"
has "no expectations" "engine/mine/gemma2-w4/extend_after_full("
has "no expectations" "): FAIL step"
check "an expected failure" 0 "$kvc" "${wrong[@]}" --expectations right.jsonc
has "an expected failure" "DEVIATION expected failure (right.jsonc:5: window one too wide): "
has "an expected failure" "0 failed, 0 skipped (1 known engine deviations)"
has "an unmatched entry" 'expectations: warning: right.jsonc:12: "^engine/mine/no-such-model/" matches no case of this run'
python3 - "$work/reports/summary.json" <<'EOF' || fails=$((fails + 1))
import json, sys
s = json.load(open(sys.argv[1]))
c = s["cases"][0]
assert c["status"] == "DEVIATION", c
assert c["expectation"] == {"outcome": "expected_failure", "file": "right.jsonc", "line": 5,
                            "case": "^engine/mine/gemma2-w4/extend_after_full$", "reason": "window one too wide",
                            "link": "https://example.org/mine/1"}, c["expectation"]
assert s["totals"]["expected_failures"] == 1 and s["totals"]["deviations"] == 1 and s["ok"], s["totals"]
EOF
grep -q 'name="kvconform.expectation" value="expected_failure"' "$work/reports/junit.xml" || { echo "FAIL: junit lacks the expectation"; fails=$((fails + 1)); }
grep -q 'data-expectation="expected_failure"' "$work/reports/report.html" || { echo "FAIL: report.html lacks the expectation"; fails=$((fails + 1)); }
grep -q 'DEVIATION (expected failure)' "$work/reports/summary.md" || { echo "FAIL: summary.md lacks the expectation"; fails=$((fails + 1)); }
# Mutant: an entry for another diagnosis does not excuse it.
check "an entry for another diagnosis" 1 "$kvc" "${wrong[@]}" --expectations other.jsonc
has "another diagnosis" "): FAIL step"
# Mutant: a --mutant run is never excused.
check "a mutant run" 1 "$kvc" "${engine[@]}" --mutant window_off_by_one+1 --expectations right.jsonc
has "a mutant run" "): FAIL step"

# The engine fixed: the entry's case passes. A warning, and a FAIL under strict.
check "an unexpected pass" 0 "$kvc" "${engine[@]}" --expectations right.jsonc
has "an unexpected pass" "expectations: warning: right.jsonc:5: unexpected pass:"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases'][0]; assert c['status']=='OK' and c['expectation']['outcome']=='unexpected_pass', c" \
  "$work/reports/summary.json" || fails=$((fails + 1))
check "an unexpected pass, strict" 1 "$kvc" "${engine[@]}" --expectations right.jsonc --strict-expectations
has "strict" "expectations: FAIL: right.jsonc:5: unexpected pass:"
has "strict" "0 passed, 1 failed"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases'][0]; assert c['status']=='FAIL' and 'unexpected pass (--strict-expectations): right.jsonc:5' in c['message'], c" \
  "$work/reports/summary.json" || fails=$((fails + 1))

# --update-expectations: a new failure is added (then the run passes), a fixed one dropped; the other
# entry and the comments stay as written.
cat >"$work/mine.jsonc" <<'EOF'
// mine's known failures: kept by every update
{
  "expectations": [
    // a hand-written entry, kept as it is
    {"case": "^engine/mine/gemma2-w4/prefill_eq_w$", "outcome": "skip", "reason": "hand-written", "link": "https://example.org/2"}
  ]
}
EOF
check "update: a new failure" 1 "$kvc" "${wrong[@]}" --expectations mine.jsonc --update-expectations
has "update" "expectations: updated mine.jsonc: 0 entries dropped (now passing), 1 added"
grep -qF '"case": "^engine/mine/gemma2-w4/extend_after_full$"' "$work/mine.jsonc" || { echo "FAIL: update added no entry"; cat "$work/mine.jsonc"; fails=$((fails + 1)); }
grep -qF '// a hand-written entry, kept as it is' "$work/mine.jsonc" || { echo "FAIL: update lost a comment"; fails=$((fails + 1)); }
check "update: the failure now expected" 0 "$kvc" "${wrong[@]}" --expectations mine.jsonc
has "update: expected" "DEVIATION expected failure (mine.jsonc:"
check "update: the engine fixed" 0 "$kvc" "${engine[@]}" --expectations mine.jsonc --update-expectations
has "update: fixed" "expectations: updated mine.jsonc: 1 entries dropped (now passing), 0 added"
if grep -q "extend_after_full" "$work/mine.jsonc" || ! grep -q '"reason": "hand-written", "link": "https://example.org/2"}' "$work/mine.jsonc"; then
  echo "FAIL: the update did not drop exactly the fixed entry"; cat "$work/mine.jsonc"; fails=$((fails + 1))
fi
# A skip entry: the case is not run.
sed -i 's|prefill_eq_w\$|extend_after_full$|' "$work/mine.jsonc"
check "a skip entry" 1 "$kvc" "${wrong[@]}" --expectations mine.jsonc
has "a skip entry" "SKIP expected skip (mine.jsonc:5: hand-written; https://example.org/2): not run"

# A malformed file: exit 2, naming file, line, field and value; no report written.
rm -rf "$work/reports"
printf '{"expectations": [\n  {"case": "^engine/", "outcome": "fial", "reason": "r"}\n]}\n' >"$work/bad.jsonc"
check "a malformed file" 2 "$kvc" "${engine[@]}" --expectations bad.jsonc
has "a malformed file" 'kvconform: bad.jsonc:2: /expectations/0/outcome: must be one of "fail", "skip", got "fial"'
[ ! -e "$work/reports" ] || { echo "FAIL: a malformed file left reports"; fails=$((fails + 1)); }
check "a missing file" 2 "$kvc" "${engine[@]}" --expectations missing.jsonc
has "a missing file" "missing.jsonc: cannot be read (--expectations)"

# The old flag, one release more.
check "--known" 0 "$kvc" "${wrong[@]}" --known right.jsonc
has "--known" "engine: --known is accepted for one more release"
has "--known" "DEVIATION expected failure (right.jsonc:5:"

if [ "$fails" != 0 ]; then
  echo "check_expectations: $fails checks failed"
  exit 1
fi
echo "check_expectations: every check passed"
