#!/usr/bin/env bash
# Creates the environment of a Python kernel adapter (docs/plugins.md, "Kernels in another process"):
#
#   bash plugins/python/setup_env.sh ort    # plugins/python/.venv-ort from requirements-ort.txt
#   bash plugins/python/setup_env.sh flex   # plugins/python/.venv-flex -> golden/.venv-5.24.0
#
# Idempotent like golden/setup_env.sh: a stamp holds the sha256 of the requirements and the
# interpreter version; when it matches and the adapter's imports work, nothing is done. Installs
# with --no-deps (everything is pinned). The flex adapter needs torch 2.13.0 + transformers 5.24.0,
# which the golden environment already pins: it is linked, not installed twice.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
name="${1:-}"
case "$name" in
  ort)
    req="$here/requirements-ort.txt"
    venv="$here/.venv-ort"
    stamp="$venv/.kvconform-stamp"
    want="$(sha256sum "$req" | cut -d' ' -f1) $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c 'import onnx, onnxruntime, ml_dtypes' 2>/dev/null; then
      echo "setup_env: $venv is up to date"; exit 0
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$req"
    "$venv/bin/python" -m pip check
    "$venv/bin/python" -c 'import onnx, onnxruntime as o; print("setup_env: onnxruntime", o.__version__, "onnx", onnx.__version__)'
    echo "$want" > "$stamp"
    echo "setup_env: created $venv" ;;
  flex)
    bash "$root/golden/setup_env.sh" 5.24.0 >/dev/null
    ln -sfn "$root/golden/.venv-5.24.0" "$here/.venv-flex"
    "$here/.venv-flex/bin/python" -c 'import torch, transformers; from torch.nn.attention.flex_attention import flex_attention; print("setup_env: flex: torch", torch.__version__, "transformers", transformers.__version__)' ;;
  *)
    echo "usage: $0 ort|flex" >&2; exit 2 ;;
esac
