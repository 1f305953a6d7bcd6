#!/usr/bin/env bash
# The model campaign catches a model mutant end to end: the oracle engine, told to read one family
# feature wrong, FAILs the campaign with a shrunk (model, plan) pair; the pair is saved once into the
# found-case corpus; replayed with --plan it FAILs again with the mutant and passes without it; and a
# plain `engine` run over that corpus replays it as a case of its own.
#   check_model_campaign.sh KVCONFORM MUTANT FAMILY [ITERATIONS]
set -uo pipefail
kvc=$1 mutant=$2 family=$3 iterations=${4:-5}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
common=(engine --engine '^oracle$' --campaign-models "$d/models" --no-report)
fail() { echo "check_model_campaign: $*" >&2; exit 1; }

out=$("$kvc" "${common[@]}" --plans models --family "^$family\$" --iterations "$iterations" --mutant "$mutant" \
      --save-regressions "$d/corpus" 2>&1)
echo "$out"
grep -q "drawn-$family/model-campaign.*: FAIL shrunk to [0-9]* steps\? on " <<< "$out" || fail "the campaign did not FAIL with a shrunk pair"
pairs=("$d"/corpus/engine/drawn/*.json)
[ ${#pairs[@]} -eq 1 ] && [ -f "${pairs[0]}" ] || fail "expected one saved pair under corpus/engine/drawn/, found: ${pairs[*]}"
grep -q '"recipe"' "${pairs[0]}" || fail "${pairs[0]} holds no recipe"

again=$("$kvc" "${common[@]}" --plan "${pairs[0]}" --mutant "$mutant" 2>&1)
echo "$again"
grep -q "^0 passed, 1 failed" <<< "$again" || fail "the saved pair did not FAIL again with --mutant $mutant"
clean=$("$kvc" "${common[@]}" --plan "${pairs[0]}" 2>&1)
echo "$clean"
grep -q "^1 passed, 0 failed" <<< "$clean" || fail "the saved pair did not pass without the mutant"
corpus=$("$kvc" "${common[@]}" --regressions "$d/corpus" --filter '/regressions/' --mutant "$mutant" 2>&1)
echo "$corpus"
grep -q "/regressions/[0-9a-f]*(.*: FAIL" <<< "$corpus" || fail "the corpus replay did not run the pair as its case"
grep -q "^0 passed, 1 failed" <<< "$corpus" || fail "the corpus replay ran something else than the one pair"
echo "check_model_campaign: $mutant on $family caught, shrunk, saved and replayed"
