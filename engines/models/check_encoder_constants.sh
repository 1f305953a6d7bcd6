#!/usr/bin/env bash
# The encoders and encoder-decoders (make_models.py --set encoders and --set drawn-encoders) make their reach and
# their family's constants act (engines/models/sensitivity.py, through the oracle's encoder forward): each local layer's reach one key
# wider, the encoder read causally, an encoder-decoder's encoder reach, t5gemma's cross-attention over the whole source,
# t5gemma2's merged cross-attention, neomme's value embeddings, exclusive self-attention, initial-state mix and output
# gate, embedding_gemma2's per-layer inputs and openai_privacy_filter's routing each move the logits past the bound. And
# the check can fail: a neomme draw whose exclusive self-attention weighs nothing (every alpha 0: tanh 0 = 0) is INERT,
# naming it, and a modernbert draw whose local layers add nothing to the residual (their attn.Wo zero) is INSENSITIVE;
# sensitivity.py exits 1 on each.
#
#   bash engines/models/check_encoder_constants.sh build/harness/kvc-model-oracle
set -u
oracle="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
for set in encoders drawn-encoders; do  # the checkpoints and the draws
  python3 "$root/engines/models/make_models.py" "$d" --set $set >/dev/null || exit 1
done
source "$root/engines/models/constants_act.sh"
out="$(acts encoder encoder 'encoder' "$d"/*)" || { echo "$out"; exit 1; }
echo "$out"
# Each family's draws' lines judge its own constants (a family whose rule the oracle no longer reports would be asked none).
for pair in "neomme:value embeddings dropped" "neomme:exclusive attention dropped" "neomme:initial mix dropped" \
            "neomme:output gate dropped" "t5gemma2:merged cross-attention's softmax apart" "t5gemma-:cross-attention windowed" \
            "t5gemma:encoder reach one key wider" "embeddinggemma2:per-layer inputs dropped" "openaiprivacyfilter:top_k" \
            "draw-:encoder read causally"; do
  family="${pair%%:*}" constant="${pair#*:}"
  if echo "$out" | grep "^draw-[a-z0-9]*${family#draw-}" | grep -vF "$constant"; then
    echo "FAIL: the lines above judged no '$constant'"; exit 1
  fi
done
# zeroed DRAW NAME REGEX: a copy of the drawn model DRAW named NAME with every tensor whose name REGEX finds set to zero.
zeroed() {
  cp -r "$d/$1" "$d/$2" && python3 - "$d/$2/model.safetensors" "$3" <<'PY' || exit 1
import json, re, struct, sys
path, pattern = sys.argv[1], re.compile(sys.argv[2])
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
hit = [k for k in header if k != "__metadata__" and pattern.search(k)]
if not hit:
    sys.exit(f"zeroed: no tensor of {path} matches {sys.argv[2]}")
for k in hit:
    a, b = header[k]["data_offsets"]
    data[8 + n + a:8 + n + b] = bytes(b - a)
open(path, "wb").write(data)
PY
}
# judged NAME VERDICT EXPECT WHY: sensitivity.py exits 1 on the model NAME, its line "NAME: VERDICT ...EXPECT".
judged() {
  local out rc
  out="$(python3 "$root/engines/models/sensitivity.py" --oracle "$oracle" "$d/$1")"
  rc=$?
  echo "$out"
  if [ $rc -ne 1 ] || ! echo "$out" | grep -q "^$1: $2 .*$3"; then echo "FAIL: $4 (exit $rc)"; exit 1; fi
}
zeroed draw-neomme-0-0 neomme-inert 'exclusive_self_attention\.alpha$'
judged neomme-inert INERT 'inert: exclusive attention dropped$' "an exclusive self-attention that weighs nothing was not found INERT"
zeroed draw-modernbert-0-0 modernbert-insensitive '^model\.layers\.[13]\.attn\.Wo\.'
judged modernbert-insensitive INSENSITIVE 'a reach one key wider on each side moves the logits by 0,' \
  "local layers that add nothing were not found INSENSITIVE"
echo "OK: every drawn encoder's reach and constants act, and an inert constant and an insensitive draw are named"
