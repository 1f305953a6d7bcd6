#!/usr/bin/env bash
# Usage: plugins/triton/setup_env.sh           (installs if needed; prints the venv's python)
#        plugins/triton/setup_env.sh --check   (prints the python only if installed; exit 1 otherwise)
# The Triton kernels' environment (plugins/triton/NOTES.md): a venv with the pinned torch (CPU) and
# triton from requirements.txt, plus the Python sources of the kernels, unpacked from the pinned
# wheels in wheels.txt (pip download --no-deps; only the files listed there, never installed: the
# packages' __init__ and dependencies are not needed, triton_env.py stubs what the files import).
# Lives at ${KVC_CACHE:-$HOME/.cache/kvconform}/triton-<first 16 hex of sha256(requirements.txt +
# wheels.txt)>, so editing either gives a fresh one. A stamp written after a complete install makes
# reruns instant; an interrupted install is redone. Concurrent callers serialize on a lock file.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
if [ $# -ne 0 ]; then echo "usage: $0 [--check]" >&2; exit 2; fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hash=$(cat "$here/requirements.txt" "$here/wheels.txt" | sha256sum | cut -c1-16)
cache=${KVC_CACHE:-$HOME/.cache/kvconform}
venv="$cache/triton-$hash"
stamp="$venv/.kvc-installed"
if [ "$check" = 1 ]; then
  [ -f "$stamp" ] || { echo "setup_env: the Triton kernels are not installed (bash plugins/triton/setup_env.sh)" >&2; exit 1; }
  echo "$venv/bin/python"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  echo "setup_env: creating $venv with $(${PYTHON:-python3} --version 2>&1)" >&2
  start=$(date +%s)
  source "$here/../../scripts/venv.sh"
  make_venv "${PYTHON:-python3}" "$venv" -q --no-deps -r "$here/requirements.txt" >&2
  mkdir -p "$venv/kernel-src" "$venv/wheels"
  grep -v '^#' "$here/wheels.txt" | while read -r pin files; do
    [ -n "$pin" ] || continue
    "$venv/bin/python" -m pip download --disable-pip-version-check -q --no-deps "$pin" -d "$venv/wheels" >&2
    wheel=$(ls "$venv/wheels/$(echo "${pin%%==*}" | tr - _)-${pin##*==}-"*.whl)
    # shellcheck disable=SC2086  # the file list is word-split on purpose
    "$venv/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], sys.argv[3:])' \
      "$wheel" "$venv/kernel-src" $files >&2
    rm -f "$wheel"
  done
  rmdir "$venv/wheels"
  TRITON_INTERPRET=1 "$venv/bin/python" "$here/triton_env.py" --check >&2
  cat "$here/requirements.txt" "$here/wheels.txt" > "$stamp"
  echo "setup_env: installed in $(( $(date +%s) - start )) s" >&2
else
  echo "setup_env: $venv is up to date" >&2
fi
echo "$venv/bin/python"
