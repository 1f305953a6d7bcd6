#!/usr/bin/env bash
# The llama.cpp worker's GGUF cache is keyed by content, not by the checkout's paths: two checkouts
# (each its own convert.py and its own venv link to the same venv) convert a checkpoint once, an
# edited convert.py converts it again, and a converter's refusal or exception is kept (the second
# run of such a checkpoint starts no converter and says the same).
#
#   bash engines/llama_cpp/check_gguf_cache.sh KVCONFORM MODELS_DIR
#
# MODELS_DIR holds cwm-w3 and qwen3-w3 (make_models.py --set families); the zoo models are written here. Exit 77: no worker.
set -euo pipefail
kvc=$1
models=$2
test -x build-llama/kvc_llama_worker || exit 77
venv=$(readlink -f golden/.venv-5.24.0)
src=${KVC_CACHE:-$HOME/.cache/kvconform}/llama-0.3.36/src
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# gemma2-w4 and gemma3-irregular-w4 are zoo models, which `kvconform engine` no longer writes into the
# families folder: one folder of links holds them (written here by the generator) beside the families'
# cwm-w3 and qwen3-w3.
families=$models models=$d/models-in
mkdir -p "$models"
python3 engines/models/make_models.py "$d/zoo" --only gemma2-w4 --only gemma3-irregular-w4 >/dev/null
for m in gemma2-w4 gemma3-irregular-w4; do ln -s "$d/zoo/$m" "$models/$m"; done
for m in cwm-w3 qwen3-w3; do ln -s "$families/$m" "$models/$m"; done
# Each "checkout" holds its own convert.py where a checkout has it, and the package beside it (with
# KVC_ZYGOTE=1 the converter hands off to the Python fork server, as the checkout's does).
for clone in a b; do
  mkdir -p "$d/$clone/engines/llama_cpp"
  ln -s "$venv" "$d/$clone/venv"
  ln -s "$PWD/python" "$d/$clone/python"
  cp engines/llama_cpp/convert.py "$d/$clone/engines/llama_cpp/convert.py"
done
# Every converter start is a line in calls.
printf '#!/bin/sh\necho "$@" >> "%s/calls"\nexec "$@"\n' "$d" > "$d/count.sh"
: > "$d/calls"
export KVC_LLAMA_GGUF_DIR=$d/gguf
run() {  # CLONE MODEL [MODELS]: kvconform's exit status (a refused checkpoint alone checks nothing: 1)
  KVC_LLAMA_CONVERT="sh $d/count.sh $d/$1/venv/bin/python $d/$1/engines/llama_cpp/convert.py --src $src" \
    "$kvc" engine --models "${3:-$models}" --engine '^llama.cpp/default$' --model "^$2\$" --filter '/prefill_gt_w$' \
    --no-regressions --no-report >"$d/out" 2>&1
}
expect_calls() {  # N WHAT
  local n
  n=$(wc -l < "$d/calls")
  if [ "$n" != "$1" ]; then
    cat "$d/calls"
    echo "check_gguf_cache: $2: $n converter starts, expected $1"
    exit 1
  fi
}
run a gemma2-w4 || { cat "$d/out"; exit 1; }
expect_calls 1 "checkout a, gemma2-w4"
run b gemma2-w4 || { cat "$d/out"; exit 1; }
expect_calls 1 "checkout b, the same checkpoint and convert.py (a path in the key would convert again)"
run a cwm-w3 || true
grep -q "SKIP the engine refused the model: .*no class for the checkpoint's architecture" "$d/out" ||
  { cat "$d/out"; echo "check_gguf_cache: cwm-w3 was not refused"; exit 1; }
run b cwm-w3 || true
expect_calls 2 "cwm-w3 refused twice from two checkouts (the refusal kept once)"
grep -q "SKIP the engine refused the model: .*no class for the checkpoint's architecture (convert.py: " "$d/out" ||
  { cat "$d/out"; echo "check_gguf_cache: the kept refusal lost the converter's reason"; exit 1; }
# A Gemma 2 whose soft-caps are null does not convert (llama.cpp's finding 41: struct.error): the
# converter's exception is kept too, and read back with the same message.
mkdir -p "$d/models/gemma2-nullcap"
cp "$models/gemma2-w4/model.safetensors" "$d/models/gemma2-nullcap/"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.update(attn_logit_softcapping=None, final_logit_softcapping=None); json.dump(c, open(sys.argv[2], "w"))' \
  "$models/gemma2-w4/config.json" "$d/models/gemma2-nullcap/config.json"
run a gemma2-nullcap "$d/models" || true
grep -q "load: converter failed (exit 1: struct.error" "$d/out" || { cat "$d/out"; echo "check_gguf_cache: gemma2-nullcap converted"; exit 1; }
cp "$d/out" "$d/out.first"
run b gemma2-nullcap "$d/models" || true
expect_calls 3 "gemma2-nullcap failing twice from two checkouts (the exception kept once)"
diff <(grep '^engine/' "$d/out.first") <(grep '^engine/' "$d/out") ||
  { echo "check_gguf_cache: the kept exception reads otherwise than the first"; exit 1; }
echo "# edited" >> "$d/b/engines/llama_cpp/convert.py"
run b gemma2-w4 || { cat "$d/out"; exit 1; }
expect_calls 4 "an edited convert.py"
echo "check_gguf_cache: the worker: 4 converter starts for 7 loads from two checkouts"
# One worker converting several checkpoints starts its converter once (convert.py --serve, the imports
# done once), and each GGUF is byte for byte what a converter run of its own writes.
: > "$d/calls"
export KVC_LLAMA_GGUF_DIR=$d/gguf-served
run a '(gemma2-w4|gemma3-irregular-w4|qwen3-w3)' || { cat "$d/out"; exit 1; }
expect_calls 1 "three checkpoints converted by one worker (a converter start for each, without convert.py --serve)"
[ "$(ls "$d"/gguf-served/*.gguf | wc -l)" = 3 ] || { ls "$d/gguf-served"; echo "check_gguf_cache: not three GGUFs"; exit 1; }
for m in gemma2-w4 gemma3-irregular-w4 qwen3-w3; do
  "$d/a/venv/bin/python" "$d/a/engines/llama_cpp/convert.py" "$models/$m" "$d/alone-$m.gguf" --src "$src" >/dev/null 2>&1
  served=$(for g in "$d"/gguf-served/*.gguf; do if cmp -s "$g" "$d/alone-$m.gguf"; then echo "$g"; fi; done)
  [ -n "$served" ] || { echo "check_gguf_cache: the served GGUF of $m differs from convert.py's own run"; exit 1; }
done
echo "check_gguf_cache: the worker: 1 converter start for 3 checkpoints, each GGUF as convert.py alone writes it"
export KVC_LLAMA_GGUF_DIR=$d/gguf

# llama-server's adapter keeps its converter's refusal as well: the second run reads the kept file
# (here rewritten, so that reading it shows) instead of converting again.
cache=${KVC_CACHE:-$HOME/.cache/kvconform}
if [ -x "$cache/llama-11434/install/bin/llama-server" ]; then
  mkdir -p "$d/cache/llama-11434"
  ln -s "$cache/llama-11434/src" "$cache/llama-11434/install" "$d/cache/llama-11434/"
  server() {  # MODEL MODELS
    KVC_CACHE=$d/cache "$kvc" engine --models "$2" --engine '^llama-server-b11434/default$' --model "^$1\$" \
      --filter '/prefill_gt_w$' --no-regressions --no-report >"$d/out" 2>&1 || true
  }
  # MODEL MODELS SUFFIX WHAT EXPECTED: the verdict kept once, then read back instead of converting again.
  read_back() {
    server "$1" "$2"
    kept=$(ls "$d"/cache/llama-11434/gguf/*."$3" 2>/dev/null || true)
    [ -n "$kept" ] || { cat "$d/out"; echo "check_gguf_cache: llama-server kept no $4 of $1"; exit 1; }
    echo "the kept $4, read back" > "$kept"
    server "$1" "$2"
    grep -q "$5: the kept $4, read back" "$d/out" ||
      { cat "$d/out"; echo "check_gguf_cache: llama-server converted $1 again instead of reading its kept $4"; exit 1; }
  }
  read_back cwm-w3 "$models" refused refusal "SKIP the engine refused the model"
  read_back gemma2-nullcap "$d/models" failed "converter exception" "FAIL load: RuntimeError"
  echo "check_gguf_cache: llama-server: the refusal and the exception kept and read back"
fi
echo "check_gguf_cache: OK"
