#!/usr/bin/env bash
# The layering rules of docs/architecture.md ("Layering rules"), each one checked here and no other:
#   L1  the harness library and the reports include nothing from generators/ (kvcgen/) or RapidCheck;
#   L2  nothing but the CLI includes the CLI's headers (harness/cli/): not the library, the reports,
#       the generators, the plugins or the fuzz targets;
#   L3  core (the CMake targets kvc_core and kvc_cases) reaches neither the reports (harness/report/)
#       nor the CLI, through any chain of includes;
#   L4  the code that builds without LibTorch stays without it, through any chain of includes: core,
#       the reports, the found-case corpus (harness/regressions/), the plugin runner (plugin_runner.cpp), the worker process and the engine level
#       (the CMake targets kvc_worker and kvc_engine) and the fuzz targets (fuzz/);
#   L5  plugins (plugins/ but plugins/tests/, examples/) include from kvconform only the ABI header
#       kvconform/plugin_abi.h (besides the plugin helpers in plugins/common/ and their own folder);
#   L6  RapidCheck's internal runner (rc::detail) is reached from one adapter file,
#       generators/src/rc_check.cpp (with its header).
# Run by ctest (layers_point_down). Prints every offending line, with the rule, and exits 1.
set -u
cd "$(dirname "$0")/.."
status=0
broken() { echo "$1: $2"; status=1; }

# Project folders that hold headers reached by <...> includes (harness/include, harness/report/include, ...).
mapfile -t include_dirs < <(find harness generators plugins -type d -name include -not -path '*/.venv*' | sort)
sources() { find "$@" -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) \
  -not -path '*/.venv*' 2>/dev/null | sort; }
# "LINE:path" of each #include of a file.
includes_of() { grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$1" |
  sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1:\2/'; }
# resolve FROM INCLUDE sets $resolved to the repository file an include names, or to nothing (a system
# or third-party header). Cached: the same folder and include resolve the same way.
declare -A resolve_cache
resolve() {
  local key="${1%/*}|$2" cand
  if [ -z "${resolve_cache[$key]+x}" ]; then
    resolve_cache[$key]=""
    for cand in "${1%/*}/$2" "${include_dirs[@]/%//$2}"; do
      if [ -f "$cand" ]; then resolve_cache[$key]=$(realpath -m --relative-to=. "$cand"); break; fi
    done
  fi
  resolved=${resolve_cache[$key]}
}
# reach FILE sets $reached to every repository file FILE reaches through its includes, itself included
# (one per line).
reach() {
  local -A seen=([$1]=1)
  local queue=("$1") f line
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    while IFS= read -r line; do
      resolve "$f" "${line#*:}"
      if [ -n "$resolved" ] && [ -z "${seen[$resolved]+x}" ]; then seen[$resolved]=1; queue+=("$resolved"); fi
    done < <(includes_of "$f")
  done
  reached=$(printf '%s\n' "${!seen[@]}" | sort)
}
# Sources of a CMake target, from its add_library/add_executable under harness/ (paths from the repo root).
target_sources() {
  local target=$1 file
  while IFS= read -r file; do
    awk -v t="$target" '
      $0 ~ "add_(library|executable)\\(" t "[ )]" {on = 1}
      on {print; if ($0 ~ /\)/) exit}' "$file" |
      tr -s ' \t()' '\n' | grep -E '^[A-Za-z0-9_./-]+\.(cpp|cc|c)$' | sed "s#^#$(dirname "$file")/#"
  done < <(find harness -name CMakeLists.txt | sort)
}

mapfile -t library < <(sources harness/src harness/include)
mapfile -t reports < <(sources harness/report)
mapfile -t corpus < <(sources harness/regressions)
mapfile -t generators < <(sources generators)
mapfile -t plugins < <(sources plugins examples | grep -v '^plugins/tests/')
mapfile -t fuzzers < <(sources fuzz)
mapfile -t core < <({ target_sources kvc_core; target_sources kvc_cases; } | sort -u)
mapfile -t runner < <(find harness -name plugin_runner.cpp | sort)
mapfile -t engines < <({ target_sources kvc_worker; target_sources kvc_engine; } | sort -u)
[ ${#engines[@]} -gt 0 ] || broken L4 "no sources found for the CMake targets kvc_worker, kvc_engine under harness/ (renamed? update this script and docs/architecture.md)"
[ ${#core[@]} -gt 0 ] || broken L3 "no sources found for the CMake targets kvc_core, kvc_cases under harness/ (renamed? update this script and docs/architecture.md)"
[ ${#runner[@]} -gt 0 ] || broken L4 "plugin_runner.cpp not found under harness/ (renamed? update this script and docs/architecture.md)"

# L1: harness/ does not reach up into generators/ or RapidCheck.
for f in "${library[@]}" "${reports[@]}" "${corpus[@]}"; do
  while IFS= read -r line; do
    broken L1 "$f:${line%%:*}: includes ${line#*:} (harness/ must not reach up into generators/ or RapidCheck)"
  done < <(includes_of "$f" | grep -E ':(kvcgen/|rapidcheck)')
done

# L2: only the CLI includes the CLI.
for f in "${library[@]}" "${reports[@]}" "${generators[@]}" "${plugins[@]}" "${fuzzers[@]}"; do
  while IFS= read -r line; do
    resolve "$f" "${line#*:}"
    case "$resolved" in harness/cli/*) broken L2 "$f:${line%%:*}: includes $resolved (only the CLI includes harness/cli/)" ;; esac
  done < <(includes_of "$f")
done

# L3 and L4 over every chain of includes; the chain's end is named.
torch_free=("${core[@]}" "${reports[@]}" "${corpus[@]}" "${runner[@]}" "${engines[@]}" "${fuzzers[@]}")
declare -A in_core
for f in "${core[@]}"; do in_core[$f]=1; done
for f in "${torch_free[@]}"; do
  [ -f "$f" ] || { broken L3 "$f: listed in CMake but missing"; continue; }
  reach "$f"
  while IFS= read -r r; do
    if [ -n "${in_core[$f]+x}" ]; then
      case "$r" in
        harness/report/*) broken L3 "$f reaches $r (core must not include the reports)" ;;
        harness/cli/*) broken L3 "$f reaches $r (core must not include the CLI)" ;;
      esac
    fi
    while IFS= read -r line; do
      broken L4 "$f reaches $r:${line%%:*}: ${line#*:} (this code builds without LibTorch)"
    done < <(includes_of "$r" | grep -E ':(ATen|torch|c10|caffe2)/')
  done <<<"$reached"
done

# L5: plugins see only the ABI.
for f in "${plugins[@]}"; do
  while IFS= read -r line; do
    inc=${line#*:}
    resolve "$f" "$inc"
    case "$inc" in
      kvconform/plugin_abi.h) continue ;;
      kvconform/* | kvcgen/*) broken L5 "$f:${line%%:*}: includes $inc (plugins include only kvconform/plugin_abi.h)"; continue ;;
    esac
    case "$resolved" in
      "" | plugins/common/* | "${f%/*}"/*) ;;
      *) broken L5 "$f:${line%%:*}: includes $resolved (plugins include only kvconform/plugin_abi.h and plugins/common/)" ;;
    esac
  done < <(includes_of "$f")
done

# L6: rc::detail in one adapter.
users=$(grep -rlE 'rc::detail' --include='*.cpp' --include='*.h' harness generators plugins fuzz |
  grep -vE '^generators/(src/rc_check.cpp|include/kvcgen/rc_check.h)$' || true)
[ -z "$users" ] || broken L6 "rc::detail outside generators/src/rc_check.cpp: $users"

if [ $status -eq 0 ]; then
  echo "layers point down: L1-L6 of docs/architecture.md hold (${#core[@]} core sources, ${#library[@]} library," \
    "${#reports[@]} report, ${#generators[@]} generator, ${#plugins[@]} plugin, ${#fuzzers[@]} fuzz files)"
fi
exit $status
