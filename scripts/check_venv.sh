#!/usr/bin/env bash
# make_venv (scripts/venv.sh) installs without byte-compiling, and the venv then writes the bytecode
# of a module at its first import even where PYTHONDONTWRITEBYTECODE is set; a venv made by each of
# two mutants of venv.sh (pip compiling; no .pth) fails the check that names it.
#   check_venv.sh [VENV_SH]   checks the given venv.sh (default: the one beside this script)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv_sh=${1:-$here/venv.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A wheel of one module, written by hand: pip installs it offline, with nothing to build.
mkdir -p "$work/whl/kvc_probe-1.0.dist-info"
echo 'VALUE = 42' > "$work/whl/kvc_probe.py"
printf 'Metadata-Version: 2.1\nName: kvc-probe\nVersion: 1.0\n' > "$work/whl/kvc_probe-1.0.dist-info/METADATA"
printf 'Wheel-Version: 1.0\nGenerator: check_venv\nRoot-Is-Purelib: true\nTag: py3-none-any\n' > "$work/whl/kvc_probe-1.0.dist-info/WHEEL"
printf 'kvc_probe.py,,\nkvc_probe-1.0.dist-info/METADATA,,\nkvc_probe-1.0.dist-info/WHEEL,,\nkvc_probe-1.0.dist-info/RECORD,,\n' \
  > "$work/whl/kvc_probe-1.0.dist-info/RECORD"
(cd "$work/whl" && python3 -m zipfile -c "$work/kvc_probe-1.0-py3-none-any.whl" kvc_probe.py kvc_probe-1.0.dist-info)

# check VENV_SH: 0 when it passes; 1 with the reason on stderr
check() {
  local venv="$work/venv"
  (source "$1" && make_venv python3 "$venv" --quiet --no-index "$work/kvc_probe-1.0-py3-none-any.whl") >/dev/null
  local module
  module=$("$venv/bin/python" -c 'import importlib.util; print(importlib.util.find_spec("kvc_probe").origin)')
  local pyc
  pyc=$("$venv/bin/python" -c 'import importlib.util, sys; print(importlib.util.cache_from_source(sys.argv[1]))' "$module")
  if [ -e "$pyc" ]; then echo "check_venv: pip byte-compiled what it installed ($pyc)" >&2; return 1; fi
  PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -c 'import kvc_probe; assert kvc_probe.VALUE == 42'
  if [ ! -e "$pyc" ]; then echo "check_venv: the first import wrote no bytecode ($pyc)" >&2; return 1; fi
}
check "$venv_sh"
# Each mutant fails with its own reason.
for mutant in 's/ --no-compile//|pip byte-compiled' '/dont_write_bytecode/d|wrote no bytecode'; do
  sed "${mutant%%|*}" "$venv_sh" > "$work/mutant.sh"
  if check "$work/mutant.sh" 2> "$work/reason"; then
    echo "check_venv: the mutant '${mutant%%|*}' of venv.sh passed" >&2
    exit 1
  fi
  grep -q "${mutant#*|}" "$work/reason" || { echo "check_venv: the mutant '${mutant%%|*}' failed otherwise: $(cat "$work/reason")" >&2; exit 1; }
done
echo "check_venv: make_venv installs without bytecode and writes it at the first import; both mutants fail"
