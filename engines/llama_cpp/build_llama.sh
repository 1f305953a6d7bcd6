#!/usr/bin/env bash
# Builds llama.cpp's `llama` library with ggml's CPU backend from the pinned llama-cpp-python sdist
# (the same bytes as plugins/ggml, fetched and sha256-checked by plugins/ggml/fetch_sdist.sh) into
# a cache prefix, static and position independent, for engines/llama_cpp/worker.cpp. CPU only, not
# native (the cache must run on any x86-64 machine), no OpenMP, no tests/examples/tools/server/curl.
# A second run finds the stamp and does nothing. Prints the prefix on stdout (pass it as
# -DKVC_LLAMA_ROOT=...), progress on stderr. The unpacked source stays in the cache: convert.py
# imports the sdist's gguf-py and convert_hf_to_gguf.py from $cache/src.
#
#   engines/llama_cpp/build_llama.sh        # cache in ${KVC_CACHE:-$HOME/.cache/kvconform}
#   KVC_LLAMA_JOBS=2 engines/llama_cpp/build_llama.sh
set -euo pipefail

version=0.3.36
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${KVC_CACHE:-${HOME:?set HOME or KVC_CACHE}/.cache/kvconform}/llama-$version"
prefix="$cache/install"

if [[ -f "$cache/done" ]]; then
  echo "$prefix"
  exit 0
fi

sdist="$("$root/plugins/ggml/fetch_sdist.sh")"

src="$cache/src"
rm -rf "$src"
mkdir -p "$src"
top="llama_cpp_python-$version/vendor/llama.cpp"
echo "build_llama: unpacking $top into $src" >&2
tar -xzf "$sdist" -C "$src" --strip-components=3 --exclude="$top/.git" "$top"
# The sdist has no git history: the vendored commit comes from the submodule's HEAD in the sdist.
commit="$(tar -xzOf "$sdist" "llama_cpp_python-$version/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || true)"
commit="${commit:0:40}"
# ggml's pkg-config template is left out of the sdist (see fetch_build_ggml.sh).
[[ -f "$src/ggml/ggml.pc.in" ]] || : > "$src/ggml/ggml.pc.in"

echo "build_llama: building llama (CPU) in $cache/build" >&2
cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DGGML_NATIVE="${KVC_GGML_NATIVE:-OFF}" -DGGML_OPENMP=OFF \
  -DGGML_METAL=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DGGML_ACCELERATE=OFF \
  -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMIT="${commit:-unknown}" \
  -DCMAKE_INSTALL_PREFIX="$prefix" >&2
nice cmake --build "$cache/build" -j "${KVC_LLAMA_JOBS:-2}" >&2
cmake --install "$cache/build" >&2
printf '%s\n%s\n' "$version" "${commit:-unknown}" > "$prefix/kvc-llama-version"
echo "$version $(sha256sum "$sdist" | cut -d' ' -f1) ${commit:-unknown}" > "$cache/done"
echo "$prefix"
