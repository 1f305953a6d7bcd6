#!/usr/bin/env bash
# The drawn MoE models make their expert constants act (engines/models/sensitivity.py): for every MoE
# model of the families and drawn sets, one expert more or fewer per token, the renormalisation of the
# chosen weights and the shared expert each move the logits past the bound. And the check can fail: a
# dots1 draw whose routed experts weigh nothing (routed_scaling_factor 0) is INERT, naming the routing
# constants that do not act, and sensitivity.py exits 1.
#
#   bash engines/models/check_moe_constants.sh build/harness/kvc-model-oracle
set -u
oracle="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
python3 "$root/engines/models/make_models.py" "$d" --set families >/dev/null || exit 1
python3 "$root/engines/models/make_models.py" "$d" --set drawn >/dev/null || exit 1
out="$(python3 "$root/engines/models/sensitivity.py" --oracle "$oracle" "$d"/*moe* "$d"/*dots1* "$d"/*mellum* "$d"/*flint*)"
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then echo "FAIL: a MoE model's window or expert constant does not act (exit $rc)"; exit 1; fi
if echo "$out" | grep -v 'experts ('; then echo "FAIL: the lines above judged no expert constant"; exit 1; fi
python3 "$root/engines/models/make_models.py" --draw dots1:0:0 |
  python3 -c 'import json, sys; r = json.load(sys.stdin); r["name"] = r["folder"] = "dots1-inert"; r["config"]["routed_scaling_factor"] = 0.0; print(json.dumps(r))' |
  python3 "$root/engines/models/make_models.py" "$d" --recipe - >/dev/null || exit 1
out="$(python3 "$root/engines/models/sensitivity.py" --oracle "$oracle" "$d/dots1-inert")"
rc=$?
echo "$out"
if [ $rc -ne 1 ] || ! echo "$out" | grep -q 'dots1-inert: INERT .*inert: top_k'; then
  echo "FAIL: routed experts that weigh nothing were not found INERT (exit $rc)"
  exit 1
fi
echo "OK: every MoE model's expert constants act, and inert ones are named"
