#!/usr/bin/env bash
# The mutant x suite matrix of docs/mutants.md, measured: every reference mutant through every suite
# that runs the reference, one Markdown row per mutant with the count of failing cases per suite.
#
#   bash scripts/mutant_matrix.sh [--differential VERSION]   (after scripts/setup.sh; ~2 min, +1 min per
#                                                             mutant with --differential)
# A cell is "caught (N FAIL)" when the suite exits 1 with N failing cases, "not caught" when it exits
# 0. The differential column needs golden/.venv-VERSION (KVC_WITH_GOLDEN=1 bash scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
kvc=build/cli/kvconform
diff_version=""
if [ "${1:-}" = "--differential" ]; then diff_version="${2:?--differential needs a transformers version}"; fi

cell() {  # runs a kvconform command; prints the cell for its outcome
  local out code=0
  out=$("$kvc" "$@" 2>&1) || code=$?
  local fails  # from the closing "N passed, N failed, N skipped" line (run) or the FAIL summaries (fuzz)
  fails=$(sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p' <<<"$out" | tail -1)
  [ -n "$fails" ] || fails=$(grep -cE '^differential.*: FAIL' <<<"$out" || true)
  case $code in
    0) echo "not caught" ;;
    1) echo "caught ($fails FAIL)" ;;
    *) echo "error (exit $code)" ;;
  esac
}

header="| mutant | golden replay | backend suite | properties (100 cases each) |"
rule="| --- | --- | --- | --- |"
if [ -n "$diff_version" ]; then header="$header differential fuzz ($diff_version, 30 sequences) |"; rule="$rule --- |"; fi
echo "$header"
echo "$rule"
# Every mutant the binary knows, from its own error message for an unknown one.
mutants=$( { "$kvc" run --no-report --mutant '?' 2>&1 || true; } | sed -n 's/.*expected one of: none, \([^)]*\)).*/\1/p' | tr -d ',')
[ -n "$mutants" ] || { echo "mutant_matrix: cannot list the mutants" >&2; exit 2; }
for m in $mutants; do
  row="| \`$m\` | $(cell run --suite golden --mutant "$m" --no-report) | $(cell run --suite backend --mutant "$m" --no-report)"
  row="$row | $(cell run --suite property --iterations 100 --mutant "$m" --no-report)"
  if [ -n "$diff_version" ]; then
    row="$row | $(cell fuzz --differential --release "$diff_version" --iterations 30 --mutant "$m" --regressions "$(mktemp -d)")"
  fi
  echo "$row |"
done
