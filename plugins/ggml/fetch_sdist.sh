#!/usr/bin/env bash
# Fetches the pinned llama-cpp-python sdist (llama.cpp's source as PyPI ships it, vendored under
# vendor/llama.cpp), checks its sha256 and prints its path on stdout; progress goes to stderr.
# Shared by plugins/ggml/fetch_build_ggml.sh and engines/llama_cpp/build_llama.sh, so both build from
# the same bytes. The download is kept in ${KVC_CACHE:-$HOME/.cache/kvconform}/ggml-VERSION/dl.
#
#   sdist="$(plugins/ggml/fetch_sdist.sh)"
#   PYTHON=/path/python plugins/ggml/fetch_sdist.sh     # whose pip downloads it
set -euo pipefail

version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${KVC_CACHE:-${HOME:?set HOME or KVC_CACHE}/.cache/kvconform}/ggml-$version"
sdist="$cache/dl/llama_cpp_python-$version.tar.gz"

if [[ ! -f "$sdist" ]]; then
  mkdir -p "$cache/dl"
  # pip: $PYTHON's, the project venv's, or a small venv of its own in the cache.
  python="${PYTHON:-}"
  if [[ -z "$python" && -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; fi
  if [[ -z "$python" ]]; then
    [[ -x "$cache/venv/bin/python" ]] || python3 -m venv "$cache/venv" >&2
    python="$cache/venv/bin/python"
  fi
  echo "fetch_sdist: pip download llama-cpp-python==$version (sdist)" >&2
  "$python" -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$cache/dl" >&2
fi
if ! echo "$sha256  $sdist" | sha256sum -c --status; then
  echo "fetch_sdist: sha256 of $sdist is not $sha256: refusing it" >&2
  rm -f "$sdist"
  exit 1
fi
echo "$sdist"
