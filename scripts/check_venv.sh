#!/usr/bin/env bash
# make_venv (scripts/venv.sh) installs with uv (or with pip where KVC_UV=0) without byte-compiling,
# and the venv then writes the bytecode of a module at its first import even where
# PYTHONDONTWRITEBYTECODE is set; a venv made by each of three mutants of venv.sh (uv compiling, pip
# compiling, no .pth) fails the check that names it.
#   check_venv.sh [--mutants] [VENV_SH]   checks the given venv.sh (default: the one beside this script);
#                                        --mutants: shows instead that the three mutants fail the check
# Two ctests, so that CI's mutant slices (scripts/ci_slice.py) can run the mutants apart.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mutants=0
[ "${1:-}" != --mutants ] || { mutants=1; shift; }
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

# check VENV_SH INSTALLER: 0 when it passes; 1 with the reason on stderr
check() {
  local venv="$work/venv" uv=1
  [ "$2" = uv ] || uv=0
  (source "$1" && KVC_UV=$uv make_venv python3 "$venv" --quiet --no-index "$work/kvc_probe-1.0-py3-none-any.whl") >/dev/null
  local installer
  installer=$("$venv/bin/python" -c 'import importlib.metadata as m; print((m.distribution("kvc-probe").read_text("INSTALLER") or "").strip())')
  if [ "$installer" != "$2" ]; then echo "check_venv: $2 was to install, $installer did" >&2; return 1; fi
  local module
  module=$("$venv/bin/python" -c 'import importlib.util; print(importlib.util.find_spec("kvc_probe").origin)')
  local pyc
  pyc=$("$venv/bin/python" -c 'import importlib.util, sys; print(importlib.util.cache_from_source(sys.argv[1]))' "$module")
  if [ -e "$pyc" ]; then echo "check_venv: $2 byte-compiled what it installed ($pyc)" >&2; return 1; fi
  PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -c 'import kvc_probe; assert kvc_probe.VALUE == 42'
  if [ ! -e "$pyc" ]; then echo "check_venv: the first import wrote no bytecode ($pyc)" >&2; return 1; fi
}
if [ "$mutants" = 0 ]; then
  check "$venv_sh" uv
  check "$venv_sh" pip
  echo "check_venv: make_venv installs with uv or pip without bytecode, and the venv writes it at the first import"
  exit 0
fi
# Each mutant fails with its own reason.
for mutant in 'uv|s/--index-strategy unsafe-best-match/--compile-bytecode &/|uv byte-compiled' \
              'pip|s/ --no-compile//|pip byte-compiled' 'uv|/dont_write_bytecode/d|wrote no bytecode'; do
  installer=${mutant%%|*} rest=${mutant#*|}
  sed "${rest%%|*}" "$venv_sh" > "$work/mutant.sh"
  if check "$work/mutant.sh" "$installer" 2> "$work/reason"; then
    echo "check_venv: the mutant '${rest%%|*}' of venv.sh passed" >&2
    exit 1
  fi
  grep -q "${rest#*|}" "$work/reason" || { echo "check_venv: the mutant '${rest%%|*}' failed otherwise: $(cat "$work/reason")" >&2; exit 1; }
done
echo "check_venv: the three mutants of venv.sh fail the check, each with its own reason"
