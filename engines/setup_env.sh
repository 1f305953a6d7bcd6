#!/usr/bin/env bash
# Usage: engines/setup_env.sh NAME            (installs if needed)
#        engines/setup_env.sh --check NAME    (prints the python only if installed; exit 1 otherwise)
# Creates (once) the virtual environment of engine NAME from engines/NAME/requirements.txt and prints
# its python's path on stdout; progress goes to stderr. The venv lives at
#   ${KVC_CACHE:-$HOME/.cache/kvconform}/engine-NAME-<first 16 hex of sha256(requirements.txt)>
# so editing the requirements gives a fresh venv. A stamp file written after a successful install
# makes reruns instant; an interrupted install is redone from scratch. Concurrent callers serialize
# on a lock file. PYTHON picks the interpreter (default python3). A line `# setup_env: --no-deps` in the
# requirements says the file is a complete pinned list that must be installed as written (pip --no-deps): for a
# wheel that declares a dependency which breaks it here.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
if [ $# -ne 1 ]; then echo "usage: $0 [--check] NAME" >&2; exit 2; fi
name=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
req="$here/$name/requirements.txt"
[ -f "$req" ] || { echo "setup_env: no $req" >&2; exit 2; }
hash=$(sha256sum "$req" | cut -c1-16)
cache=${KVC_CACHE:-$HOME/.cache/kvconform}
venv="$cache/engine-$name-$hash"
stamp="$venv/.kvc-installed"
if [ "$check" = 1 ]; then
  [ -f "$stamp" ] || { echo "setup_env: $name is not installed (bash engines/setup_env.sh $name)" >&2; exit 1; }
  echo "$venv/bin/python"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  echo "setup_env: creating $venv with $(${PYTHON:-python3} --version 2>&1) from $req" >&2
  start=$(date +%s)
  flags=()
  if grep -qx '# setup_env: --no-deps' "$req"; then flags+=(--no-deps); fi
  source "$here/../scripts/venv.sh"
  make_venv "${PYTHON:-python3}" "$venv" --upgrade pip >&2
  venv_install "$venv/bin/python" "${flags[@]}" -r "$req" >&2
  cp "$req" "$stamp"
  echo "setup_env: installed in $(( $(date +%s) - start )) s" >&2
else
  echo "setup_env: $venv is up to date" >&2
fi
echo "$venv/bin/python"
