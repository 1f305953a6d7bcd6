#!/usr/bin/env bash
# Formats the project's own C++ in place with clang-format (.clang-format): harness/, cli/,
# generators/, plugins/ and engines/, the files git tracks. scripts/lint.sh checks the same files.
#   bash scripts/format.sh [FILE...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source "$root/scripts/lint_files.sh"
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (bash scripts/setup.sh --packages)" >&2; exit 2; }
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(kvc_cpp_files)
printf '%s\0' "${files[@]}" | xargs -0 -n 20 -P "$(nproc)" clang-format -i
echo "format: ${#files[@]} files formatted"
