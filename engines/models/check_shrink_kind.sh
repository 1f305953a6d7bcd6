#!/usr/bin/env bash
# Shrinking keeps the failure it found: the oracle engine reads the window one too large (wrong
# logits) and also fails to load any model of fewer layers than the drawn one (a second, unrelated
# bug). The campaign, started at that drawn pair, must shrink to a pair that still has every layer and
# still fails on its logits; a shrinker that took any failure would slide into the load error.
#   check_shrink_kind.sh KVCONFORM FAMILY SEED INDEX SIZE
set -uo pipefail
kvc=$1 family=$2 seed=$3 index=$4 size=$5
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "check_shrink_kind: $*" >&2; exit 1; }

recipe=$(python3 engines/models/make_models.py --draw "$family:$seed:$index") || fail "could not draw $family:$seed:$index"
layers=$(echo "$recipe" | python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["num_hidden_layers"])')
[ "$layers" -ge 2 ] || fail "$family:$seed:$index has $layers layer: a layer fewer would be no model, pick another draw"
out=$("$kvc" engine --engine-cmd build/harness/kvc-oracle-engine --engine-name oracle-load-error \
      --engine-options "{\"fault\": \"load-error@$layers\"}" --mutant window_off_by_one+1 --plans models --family "^$family\$" \
      --seed "$seed" --reproduce "trace:$seed:$index:$size" --campaign-models "$d/models" --no-report 2>&1)
echo "$out"
line=$(grep "drawn-$family/model-campaign.*: FAIL" <<< "$out") || fail "the campaign did not FAIL"
grep -q "FAIL shrunk to [0-9]* steps\? on $layers layers: .*max |logit error|" <<< "$line" ||
  fail "the shrunk pair is not the window bug on all $layers layers (a shrink that slid into the load error?)"
if "$kvc" engine --engine-cmd build/harness/kvc-oracle-engine --engine-options "{\"fault\": \"load-error@$layers\"}" \
     --plans models --family "^$family\$" --seed "$seed" --reproduce "trace:$seed:$index:$size" \
     --campaign-models "$d/models" --no-report > "$d/clean.log" 2>&1; then
  echo "check_shrink_kind: the shrink kept the logits failure on $layers layers; without the window bug the pair passes"
else
  cat "$d/clean.log"
  fail "without --mutant the pair did not pass: the load-error fault alone broke a model of $layers layers"
fi
