#!/usr/bin/env bash
# Packs what a GPU machine lacks to build kvconform against its own CUDA LibTorch (it has torch,
# CMake and nvcc, but no Debian -dev packages): the headers, static libraries and CMake package files
# of GoogleTest, RapidCheck, nlohmann/json, CLI11 and OpenSSL's libcrypto, into .devdeps/ (git-ignored
# through .git/info/exclude), about 12 MB. Then scripts/gpu_check.sh runs there with .devdeps and
# .deps carried along.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .devdeps
d=.devdeps/usr
mkdir -p $d/include/x86_64-linux-gnu $d/lib/x86_64-linux-gnu/cmake $d/share/cmake
cp -r /usr/include/{nlohmann,gtest,rapidcheck,rapidcheck.h,CLI,openssl} $d/include/
cp -r /usr/include/x86_64-linux-gnu/openssl $d/include/x86_64-linux-gnu/
cp -r /usr/lib/x86_64-linux-gnu/cmake/{GTest,rapidcheck} $d/lib/x86_64-linux-gnu/cmake/
cp -r /usr/share/cmake/{nlohmann_json,CLI11} $d/share/cmake/
cp -L /usr/lib/x86_64-linux-gnu/{libgtest.a,libgtest_main.a,librapidcheck.a,libcrypto.so.3} $d/lib/x86_64-linux-gnu/
ln -sf libcrypto.so.3 $d/lib/x86_64-linux-gnu/libcrypto.so
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
du -sh .devdeps
