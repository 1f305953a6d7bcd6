#!/usr/bin/env bash
# The ctests of the Python package (python/CMakeLists.txt, label plugin).
#   ctest_env.sh install OUT PYTHON   pip-installs the package from the checkout into OUT/site, as a
#                                     user would (no build isolation: nothing downloaded), and pytest
#                                     (requirements-test.txt) into a cache outside the checkout
#   ctest_env.sh test OUT PYTHON BIN [PYTEST ARGS]
#                                     runs python/tests with that install and the kvconform binary BIN
# KVC_PYTEST_CACHE overrides the cache folder (default ~/.cache/kvconform/pytest-<hash>).
set -euo pipefail
mode="$1" out="$2" python="$3"
here="$(cd "$(dirname "$0")/.." && pwd)"
hash="$(cat "$here/requirements-test.txt" | sha256sum | cut -c1-12)"
cache="${KVC_PYTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvconform/pytest-$hash}"
if [ "$mode" = install ]; then
  rm -rf "$out/site" "$out/src"
  mkdir -p "$out/src"
  # a copy, so that setuptools' build/ and egg-info land in the build folder, not in the checkout
  cp -r "$here/pyproject.toml" "$here/README.md" "$here/kvconform" "$out/src/"
  if ! "$python" -m pip install --disable-pip-version-check --quiet --no-deps --no-build-isolation \
      --target "$out/site" "$out/src"; then
    # setuptools < 70.1 without `wheel` cannot build a wheel (docs/plugins.md): an isolated build
    echo "ctest_env.sh: no local wheel build; pip install with build isolation (fetches setuptools)" >&2
    rm -rf "$out/site"
    "$python" -m pip install --disable-pip-version-check --quiet --no-deps --target "$out/site" "$out/src"
  fi
  if [ ! -f "$cache/.complete" ]; then
    rm -rf "$cache"
    "$python" -m pip install --disable-pip-version-check --quiet --target "$cache" -r "$here/requirements-test.txt"
    touch "$cache/.complete"
  fi
  echo "installed kvconform into $out/site; pytest in $cache"
elif [ "$mode" = test ]; then
  # a copy: a concurrent rebuild relinking the binary must not pull it from under a running test
  cp "$4" "$out/kvconform-under-test"
  binary="$out/kvconform-under-test"
  shift 4
  cd "$out"  # not the checkout: `import kvconform` must find the installed package
  PYTHONPATH="$out/site:$cache" KVCONFORM_BIN="$binary" KVC_EXPECT_INSTALLED=1 \
    exec "$python" -m pytest -p no:cacheprovider -q -rfEs "$here/tests" "$@"
else
  echo "usage: ctest_env.sh install|test OUT PYTHON [BIN]" >&2
  exit 2
fi
