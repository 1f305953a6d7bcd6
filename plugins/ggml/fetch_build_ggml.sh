#!/usr/bin/env bash
# Fetches llama.cpp's source as PyPI ships it (vendored in the llama-cpp-python sdist, pinned and
# hash-checked), unpacks only ggml and the headers the plugin needs, and builds ggml's CPU backend as
# static PIC libraries into a cache outside the build tree, with the options llama.cpp's own build gives
# ggml: engines/llama_cpp/build_llama.sh links llama.cpp 0.3.36 against these same libraries, so ggml
# is compiled once for the plugins and the engine. A second run finds the stamp (the version, the
# sdist's sha256 and the options) and does nothing. Prints the install prefix (pass it as
# -DKVC_GGML_ROOT=... or GGML_ROOT) on stdout.
#
#   plugins/ggml/fetch_build_ggml.sh            # cache in ${KVC_CACHE:-$HOME/.cache/kvconform}
#   PYTHON=/path/python plugins/ggml/fetch_build_ggml.sh
set -euo pipefail

version=0.3.36
sha256="$(sed -n 's/^sha256=//p' "$(dirname "${BASH_SOURCE[0]}")/fetch_sdist.sh")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${KVC_CACHE:-${HOME:?set HOME or KVC_CACHE}/.cache/kvconform}/ggml-$version"
prefix="$cache/install"

# One build at a time: CI starts this beside the project's build, and a second caller waits for the
# first one's stamp instead of unpacking over its source.
mkdir -p "$(dirname "$cache")"
exec 8>"$cache.lock"
flock 8
# What the stamp records: a cache built otherwise (another source or other options) is built again.
options="GGML_NATIVE=${KVC_GGML_NATIVE:-OFF} GGML_LLAMAFILE=ON GGML_OPENMP=OFF"
if [[ -f "$cache/done" && "$(cat "$cache/done")" == "$version $sha256 $options" ]]; then
  echo "$prefix"
  exit 0
fi

# The pinned sdist, sha256-checked (shared with engines/llama_cpp/build_llama.sh).
sdist="$("$root/plugins/ggml/fetch_sdist.sh")"

# Only ggml, the public llama.h and the hparams header (llama_hparams::is_masked_swa) are needed.
src="$cache/src"
rm -rf "$src"
mkdir -p "$src"
top="llama_cpp_python-$version/vendor/llama.cpp"
tar -xzf "$sdist" -C "$src" --strip-components=3 \
  "$top/ggml" "$top/include" "$top/src/llama-hparams.h" "$top/src/llama-hparams.cpp" "$top/LICENSE"

# The sdist leaves out ggml.pc.in, which ggml's CMakeLists configures when built on its own; the
# pkg-config file is not used here, so an empty template stands in for it.
: > "$src/ggml/ggml.pc.in"

# CPU only, static and position independent so each plugin .so carries its own ggml. Not native:
# the cache must run on any x86-64 machine CI lands on. No OpenMP: the plugin runs in a child forked
# from a LibTorch process, which has its own OpenMP runtime. LLAMAFILE on, as llama.cpp's top-level
# CMakeLists turns it on (ggml alone defaults to off): an f32 mul_mat runs llamafile's sgemm, as in
# llama.cpp. No ccache: the stamp below is this build's cache, and ccache's work on a miss (hashing
# every include, storing every object) is a tenth of the compiler's, for objects nothing asks for again.
rm -f "$cache/done"
echo "fetch_build_ggml: building ggml (CPU) in $cache/build" >&2
cmake -S "$src/ggml" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DGGML_NATIVE="${KVC_GGML_NATIVE:-OFF}" -DGGML_OPENMP=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_METAL=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
  -DGGML_BLAS=OFF -DGGML_ACCELERATE=OFF -DGGML_LLAMAFILE=ON -DGGML_CCACHE=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >&2
cmake --build "$cache/build" -j "${KVC_GGML_JOBS:-$(nproc)}" >&2
cmake --install "$cache/build" >&2
# llama.cpp's headers beside ggml's, for the SWA mask rule (compiled from llama-hparams.h).
mkdir -p "$prefix/include/llama"
cp "$src/include/llama.h" "$src/src/llama-hparams.h" "$src/LICENSE" "$prefix/include/llama/"
echo "$version $sha256 $options" > "$cache/done"
echo "$prefix"
