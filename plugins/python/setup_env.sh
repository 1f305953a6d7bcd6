#!/usr/bin/env bash
# Creates the environment of a Python kernel adapter (docs/plugins.md, "Kernels in another process"):
#
#   bash plugins/python/setup_env.sh ort    # plugins/python/.venv-ort from requirements-ort.txt
#   bash plugins/python/setup_env.sh flex   # plugins/python/.venv-flex -> golden/.venv-5.24.0
#
# Idempotent like golden/setup_env.sh: the venv lives in the cache, named by what it is built from,
#   ${KVC_CACHE:-$HOME/.cache/kvconform}/plugin-ort-<16 hex of sha256(requirements, python X.Y)>
# and .venv-ort is a symlink to it, so a second checkout (a CI clone) reuses it. A stamp written last
# marks a complete install; concurrent callers serialize on a lock file. Installs with --no-deps
# (everything is pinned). The flex adapter needs torch 2.13.0 + transformers 5.24.0,
# which the golden environment already pins: it is linked, not installed twice.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
name="${1:-}"
case "$name" in
  ort)
    req="$here/requirements-ort.txt"
    link="$here/.venv-ort"
    want="$(sha256sum "$req" | cut -d' ' -f1) $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    cache="${KVC_CACHE:-$HOME/.cache/kvconform}"
    venv="$cache/plugin-ort-$(printf '%s' "$want" | sha256sum | cut -c1-16)"
    stamp="$venv/.kvconform-stamp"
    mkdir -p "$cache"
    exec 9>"$venv.lock"
    flock 9
    if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
           "$venv/bin/python" -c 'import onnx, onnxruntime, ml_dtypes' 2>/dev/null; }; then
      source "$root/scripts/venv.sh"
      make_venv python3 "$venv" --quiet --no-deps -r "$req"
      "$venv/bin/python" -m pip check
      "$venv/bin/python" -c 'import onnx, onnxruntime as o; print("setup_env: onnxruntime", o.__version__, "onnx", onnx.__version__)'
      echo "$want" > "$stamp"
      echo "setup_env: created $venv"
    fi
    # A venv that an older layout put in the checkout is replaced by the link.
    if [ "$(readlink "$link" 2>/dev/null)" != "$venv" ]; then
      rm -rf "$link"
      ln -s "$venv" "$link"
    fi
    echo "setup_env: $link is up to date ($venv)" ;;
  flex)
    bash "$root/golden/setup_env.sh" 5.24.0 >/dev/null
    ln -sfn "$root/golden/.venv-5.24.0" "$here/.venv-flex"
    "$here/.venv-flex/bin/python" -c 'import torch, transformers; from torch.nn.attention.flex_attention import flex_attention; print("setup_env: flex: torch", torch.__version__, "transformers", transformers.__version__)' ;;
  *)
    echo "usage: $0 ort|flex" >&2; exit 2 ;;
esac
