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
source "$root/engines/models/constants_act.sh"
acts MoE expert 'experts (' "$d"/*moe* "$d"/*dots1* "$d"/*mellum* "$d"/*flint* "$d"/*kolibri1* "$d"/*laguna* "$d"/*beam*
inert dots1:0:0 dots1-inert 'c["routed_scaling_factor"] = 0.0' 'inert: top_k' "routed experts that weigh nothing were not found"
echo "OK: every MoE model's expert constants act, and inert ones are named"
