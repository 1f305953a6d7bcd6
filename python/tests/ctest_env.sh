#!/usr/bin/env bash
# The ctests of the Python package (python/CMakeLists.txt, label plugin).
#   ctest_env.sh install OUT PYTHON   pip-installs the package from the checkout into OUT/site, as a
#                                     user would (no build isolation: nothing downloaded), and pytest
#                                     (requirements-test.txt: pytest, mypy, ruff) into a cache outside the checkout
#   ctest_env.sh test OUT PYTHON BIN [FILE [PYTEST ARGS]]
#                                     runs python/tests (or its test file FILE) with that install and
#                                     the kvconform binary BIN
#   ctest_env.sh lint OUT PYTHON      mypy --strict and ruff check on python/kvconform (pyproject.toml);
#                                     exit 77 (skipped) when the cache has not been installed
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
  cp -rL "$here/pyproject.toml" "$here/README.md" "$here/kvconform" "$out/src/"  # -L: kvconform/VERSION links to the repository's VERSION
  if ! "$python" -m pip install --disable-pip-version-check --quiet --no-deps --no-build-isolation \
      --target "$out/site" "$out/src"; then
    # setuptools < 70.1 without `wheel` cannot build a wheel (docs/plugins.md): an isolated build
    echo "ctest_env.sh: no local wheel build; pip install with build isolation (fetches setuptools)" >&2
    rm -rf "$out/site"
    "$python" -m pip install --disable-pip-version-check --quiet --no-deps --target "$out/site" "$out/src"
  fi
  if [ ! -f "$cache/.complete" ]; then
    rm -rf "$cache"
    # uncompiled, as every venv here (scripts/venv.sh): the project venv's python writes the bytecode
    # of what it imports
    source "$here/../scripts/venv.sh"
    venv_install "$python" --quiet --target "$cache" -r "$here/requirements-test.txt"
    touch "$cache/.complete"
  fi
  echo "installed kvconform into $out/site; pytest in $cache"
elif [ "$mode" = test ]; then
  # a copy per test file: a concurrent rebuild relinking the binaries must not pull them from under a
  # running test, and the test files run at once (the launcher with kvconform-libtorch, which it
  # runs from its own folder)
  under_test="$out/under-test.${5:-all}"
  mkdir -p "$under_test"
  binary="$under_test/kvconform"
  cp "$4" "$binary"
  cp "$(dirname "$4")/kvconform-libtorch" "$under_test/kvconform-libtorch"
  tests="$here/tests${5:+/$5}"
  cd "$out"  # not the checkout: `import kvconform` must find the installed package
  PYTHONPATH="$out/site:$cache" KVCONFORM_BIN="$binary" KVC_EXPECT_INSTALLED=1 \
    exec "$python" -m pytest -p no:cacheprovider -q -rfEs "$tests" "${@:6}"
elif [ "$mode" = lint ]; then
  if [ ! -f "$cache/.complete" ] || ! PYTHONPATH="$cache" "$python" -c "import mypy, ruff" 2>/dev/null; then
    echo "ctest_env.sh: mypy and ruff are not installed in $cache (ctest -R py_package_install installs them)" >&2
    exit 77
  fi
  cd "$here"
  status=0
  PYTHONPATH="$cache" "$python" -m mypy --config-file pyproject.toml --cache-dir "$out/mypy-cache" kvconform || status=1
  PYTHONPATH="$cache" "$python" -m ruff check --no-cache --config pyproject.toml kvconform || status=1
  # Each check catches its mutant: an untyped function, an unused import (else the config is not in force).
  if PYTHONPATH="$cache" "$python" -m mypy --config-file pyproject.toml --cache-dir "$out/mypy-cache" \
      -c 'def untyped(x): return x' >/dev/null 2>&1; then
    echo "ctest_env.sh: mypy accepted an untyped function: pyproject.toml's strict mode is not in force" >&2; status=1
  fi
  if echo 'import os' | PYTHONPATH="$cache" "$python" -m ruff check --no-cache --config pyproject.toml \
      --stdin-filename kvconform/mutant.py - >/dev/null 2>&1; then
    echo "ctest_env.sh: ruff accepted an unused import: pyproject.toml's rules are not in force" >&2; status=1
  fi
  [ $status = 0 ] && echo "mypy --strict and ruff check: python/kvconform is clean"
  exit $status
else
  echo "usage: ctest_env.sh install|test|lint OUT PYTHON [BIN]" >&2
  exit 2
fi
