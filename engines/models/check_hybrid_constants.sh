#!/usr/bin/env bash
# The hybrid models (lfm3, recurrent_gemma, lara_mini: the families set's checkpoints and the drawn set's draws) make their
# layer constants act (engines/models/sensitivity.py): each convolution one tap shorter (its state a row
# short), the attention gate left out and the RG-LRU's decay off each move the logits past the bound. And the check can fail: an
# lfm3 draw whose convolution is longer than the tokens it is measured over (conv_L_cache 64: the oldest
# tap never reads a token) is INERT, naming the tap, and sensitivity.py exits 1.
#
#   bash engines/models/check_hybrid_constants.sh build/harness/kvc-model-oracle
set -u
oracle="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
for set in families drawn; do  # only the sets' hybrid models (lfm3, recurrent_gemma)
  only=$(python3 "$root/engines/models/make_models.py" --set $set --list | grep -E 'lfm3|recurrentgemma|lara' | sed 's/^/--only /')
  python3 "$root/engines/models/make_models.py" "$d" --set $set $only >/dev/null || exit 1
done
source "$root/engines/models/constants_act.sh"
acts hybrid layer 'hybrid (' "$d"/*lfm3* "$d"/*recurrentgemma* "$d"/*lara*
inert lfm3:0:0 lfm3-inert 'c["conv_L_cache"] = 64' 'inert: oldest conv tap dropped' "a convolution longer than the measured tokens was not found"
echo "OK: every hybrid model's layer constants act, and inert ones are named"
