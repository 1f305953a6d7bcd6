#!/usr/bin/env bash
# The C++ lint, beside ctest in CI: clang-format's check (.clang-format) and clang-tidy's checks
# (.clang-tidy) on the project's own code, through the build's compile_commands.json.
#   bash scripts/lint.sh [--format-only | --tidy-only] [--build DIR] [--all | --since REF]
# Exits 1 naming each file clang-format would change or each clang-tidy finding, 2 for a missing tool.
# clang-tidy parses each translation unit again, about 10 s of CPU for a torch-free one and more for
# one that includes ATen: by default it checks the units whose sources changed since REF (the
# merge-base with origin/main, else main; on main itself HEAD~1, the last commit; .ci/run gives the
# last commit whose CI lint passed), which CI can afford beside ctest, and every unit where .clang-tidy
# changed since REF; --all checks every unit of the project's own code (a documented command: minutes).
#
# The format check is enforced: the tree is formatted (scripts/format.sh), and CI fails on a file
# clang-format would change. KVC_ENFORCE_FORMAT=0 only counts them (for a branch not yet formatted).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source "$root/scripts/lint_files.sh"
enforce_format="${KVC_ENFORCE_FORMAT:-1}"
format=1 tidy=1 build=build all=0 since=""
while [ $# -gt 0 ]; do
  case "$1" in
    --format-only) tidy=0 ;;
    --tidy-only) format=0 ;;
    --build) build=$2; shift ;;
    --all) all=1 ;;
    --since) since=$2; shift ;;
    *) echo "lint: unknown argument '$1' (expected --format-only, --tidy-only, --build DIR, --all or --since REF)" >&2; exit 2 ;;
  esac
  shift
done
for tool in clang-format clang-tidy; do
  command -v "$tool" >/dev/null || { echo "lint: $tool is not installed (bash scripts/setup.sh --packages)" >&2; exit 2; }
done
rc=0
if [ "$format" = 1 ]; then
  mapfile -t files < <(kvc_cpp_files)
  mapfile -t unformatted < <(printf '%s\0' "${files[@]}" | xargs -0 -n 20 -P "$(nproc)" \
    sh -c 'for f; do clang-format --dry-run "$f" 2>&1 | grep -q . && echo "$f"; done; exit 0' sh | sort)
  if [ ${#unformatted[@]} -eq 0 ]; then
    echo "lint: clang-format: ${#files[@]} files formatted"
  elif [ "$enforce_format" = 1 ]; then
    printf 'lint: clang-format would change %s (bash scripts/format.sh formats them)\n' "${unformatted[@]}" >&2
    rc=1
  else
    echo "lint: clang-format: ${#unformatted[@]} of ${#files[@]} files not formatted yet (not enforced: KVC_ENFORCE_FORMAT=0)"
  fi
fi
if [ "$tidy" = 1 ]; then
  [ -f "$build/compile_commands.json" ] || { echo "lint: $build/compile_commands.json is missing (configure the build first)" >&2; exit 2; }
  # The project's own translation units: its sources, and a unity build's Unity/*.cxx files (which
  # include them); the fetched and generated code is not linted.
  mapfile -t units < <(python3 - "$root" "$build/compile_commands.json" <<'PY'
import json, os, re, sys
root, db = sys.argv[1], sys.argv[2]
own = re.compile(re.escape(root) + r"/(harness|cli|generators|plugins|engines)/")
for e in json.load(open(db)):
    f = os.path.join(e["directory"], e["file"])
    if own.match(f) or ("/Unity/" in f and open(f).read().count(root + "/")):
        print(f)
PY
)
  if [ "$all" = 0 ]; then
    if [ -z "$since" ]; then
      since=$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main 2>/dev/null || true)
      # On main itself (a clone of main, whose merge-base is HEAD) a branch's changes are the last
      # commit's: against its first parent, a merge's are everything the branch brought.
      if [ -z "$since" ] || [ "$since" = "$(git rev-parse HEAD)" ]; then
        since=$(git rev-parse --verify -q HEAD~1) || { echo "lint: clang-tidy: HEAD has no parent: every unit"; all=1; }
      fi
    fi
  fi
  if [ "$all" = 0 ] && git diff --quiet "$since" -- .clang-tidy; then
    mapfile -t changed < <(git diff --name-only "$since" -- harness cli generators plugins engines | grep -E '\.(c|cc|cpp)$' || true)
    picked=()
    for u in "${units[@]}"; do
      for c in "${changed[@]}"; do
        if [ "$u" = "$root/$c" ] || { [[ "$u" == */Unity/* ]] && grep -qF "$root/$c" "$u"; }; then picked+=("$u"); break; fi
      done
    done
    echo "lint: clang-tidy: ${#picked[@]} of ${#units[@]} translation units changed since $(git rev-parse --short "$since") (--all checks every one)"
    units=("${picked[@]}")
  elif [ "$all" = 0 ]; then
    echo "lint: clang-tidy: .clang-tidy changed since $(git rev-parse --short "$since"): every unit"
  fi
  if [ ${#units[@]} -gt 0 ]; then
    out=$(mktemp) db=$(mktemp -d)
    trap 'rm -rf "$out" "$db"' EXIT
    # The units that use a precompiled header name GCC's (-include cmake_pch.hxx finds its .gch), which
    # clang cannot read ("not a valid precompiled PCH file"): tidy reads a copy of the compile database
    # without it, so those units include their headers themselves, as they do without KVC_PCH.
    python3 - "$build/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["command"] = re.sub(r" -include \S+cmake_pch\.hxx| -Winvalid-pch", "", e["command"])
json.dump(entries, open(sys.argv[2], "w"))
PY
    # GCC's flags clang does not know are not errors; the checks are .clang-tidy's. Debian 12's clang 14
    # has no _Float16 on x86-64 (GCC 12 has; clang from 15): tidy reads it as __fp16, clang's storage-only
    # half, which converts to and from float as the code does (model.cpp, kv_blocks.h) and is never built.
    if printf '%s\0' "${units[@]}" | xargs -0 -n 1 -P "$(nproc)" clang-tidy -p "$db" --quiet \
         --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-ignored-optimization-argument \
         --extra-arg=-D_Float16=__fp16 >"$out" 2>&1; then
      echo "lint: clang-tidy: ${#units[@]} translation units, no finding"
    else
      grep -E "(warning|error):" "$out" | sort -u >&2 || cat "$out" >&2
      echo "lint: clang-tidy: findings above (.clang-tidy names the checks)" >&2
      rc=1
    fi
  fi
fi
exit "$rc"
