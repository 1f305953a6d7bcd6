#!/usr/bin/env bash
# Installs what is missing (Debian packages, the project venv with torch), configures and builds.
# Idempotent: a second run only rebuilds what changed. Sourced by run.sh and test.sh.
# Says what it installs and shows the build's progress on stderr; -q or KVC_QUIET=1 keeps it quiet
# (the output then goes to build/setup.log and is shown only on failure).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quiet="${KVC_QUIET:-0}"
packages_only=0
for arg in "$@"; do
  case "$arg" in
    -q|--quiet) quiet=1 ;;
    --packages) packages_only=1 ;;  # the Debian packages (and valijson's headers) only: what a compile needs
    *) echo "setup: unknown argument '$arg' (expected -q or --packages)" >&2; exit 2 ;;
  esac
done
log="$root/build/setup.log"
mkdir -p build && : > "$log"
# Runs a step with its output on stderr, or into the log when quiet (printed if the step fails).
step() {
  if [ "$quiet" = 1 ]; then
    "$@" >>"$log" 2>&1 || { status=$?; cat "$log" >&2; echo "setup: failed: $*" >&2; exit "$status"; }
  else
    "$@" >&2
  fi
}
say() { [ "$quiet" = 1 ] || echo "setup: $*" >&2; }
source "$root/scripts/ci_phase.sh"  # part NAME: where a CI phase's seconds went

# clang-format and clang-tidy: scripts/lint.sh (the C++ lint CI runs) and scripts/format.sh.
debs=(build-essential ccache cmake git python3-venv libssl-dev libgtest-dev librapidcheck-dev nlohmann-json3-dev libcli11-dev
      clang-format clang-tidy)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  step $sudo_ apt-get update -q
  step env DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q "${missing[@]}"
fi
part "Debian packages"

# Headless Chromium renders reports/latest/report.html in the browser test (it skips without one).
# Installed with KVC_WITH_BROWSER=1, and in CI (CI=true) unless KVC_WITH_BROWSER=0: measured 16 s
# for `apt-get install chromium` after `apt-get update` on Debian 12 (about 350 MB on disk).
if [ "${KVC_WITH_BROWSER:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  say "installing chromium (KVC_WITH_BROWSER=0 skips it)"
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  step $sudo_ apt-get update -q
  step env DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q chromium
fi
part chromium

# valijson is header-only, but its Debian package depends on Qt, Poco and every JSON library it has
# adapters for: unpack just its headers into .deps/ instead of installing it.
if [ ! -f .deps/valijson/usr/include/valijson/validator.hpp ]; then
  say "unpacking libvalijson-dev headers into .deps/valijson"
  rm -rf .deps/valijson && mkdir -p .deps/valijson
  (cd .deps && apt-get download libvalijson-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get download libvalijson-dev >/dev/null; })
  dpkg -x .deps/libvalijson-dev_*.deb .deps/valijson && rm -f .deps/libvalijson-dev_*.deb
fi
part valijson
[ "$packages_only" = 0 ] || exit 0

# LibTorch comes from the torch wheel (a CPU build pip's configuration finds on this machine: make_venv
# passes it to uv, which would otherwise download a CUDA build of several GB). The venv lives in the cache under a name made from
# what it holds (torch's pin and the interpreter), and .venv links to it, so another checkout of
# the same pins reuses it. A .venv that is a real folder (made by hand) is left as it is.
torch_pin="torch==2.13.0"
if [ ! -e .venv ] || [ -L .venv ]; then
  cache="${KVC_CACHE:-$HOME/.cache/kvconform}"
  venv="$cache/project-$(printf '%s %s' "$torch_pin" "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" | sha256sum | cut -c1-16)"
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$venv/.kvc-installed" ]; then
      say "creating $venv with $torch_pin (a CPU wheel of about 200 MB)"
      source "$root/scripts/venv.sh"
      step make_venv python3 "$venv" "$torch_pin"
      echo "$torch_pin" > "$venv/.kvc-installed"
    fi
  ) 9>"$venv.lock"
  [ "$(readlink .venv 2>/dev/null)" = "$venv" ] || { rm -f .venv; ln -s "$venv" .venv; }
elif ! .venv/bin/python -c 'import torch' >/dev/null 2>&1; then
  echo "setup: .venv is a folder without torch; remove it, or install $torch_pin into it" >&2
  exit 1
fi
part "project venv (torch)"

# The pinned transformers environments (golden/README.md): the differential-fuzz test and
# `kvconform golden` need them. Built with KVC_WITH_GOLDEN=1, and in CI unless KVC_WITH_GOLDEN=0
# (about 35 s each from PyPI the first time; setup_env.sh does nothing when they are current).
# The transformers environments install beside the build: pip waits on the disk much of the time, the
# compiler is CPU-bound (on a cold machine, 152 s of installs and a 232 s build one after the other).
golden_pid=""
golden_log="$root/build/setup-golden.log"
if [ "${KVC_WITH_GOLDEN:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}" = 1 ]; then
  say "transformers environments (golden/.venv-*), beside the build; their log: build/setup-golden.log"
  (
    for req in golden/requirements-*.txt; do
      v="${req#golden/requirements-}"; v="${v%.txt}"
      echo "setup: transformers $v environment (golden/.venv-$v)"
      bash golden/setup_env.sh "$v" || exit
    done
  ) > "$golden_log" 2>&1 &
  golden_pid=$!
fi

if [ ! -f build/CMakeCache.txt ]; then
  say "configuring build/ (cmake)"
  prefix="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  step cmake -S . -B build -DCMAKE_PREFIX_PATH="$prefix"
fi
part "cmake configure"
say "building with $(nproc) jobs (a clean build takes a few minutes; ccache makes the next one fast, even in another checkout)"
step cmake --build build -j "$(nproc)"
part build
if [ -n "$golden_pid" ]; then
  wait "$golden_pid" || { status=$?; cat "$golden_log" >&2; echo "setup: failed: the transformers environments" >&2; exit "$status"; }
  [ "$quiet" = 1 ] || cat "$golden_log" >&2
  part "transformers environments (after the build, beside it)"
fi
say "build done"
