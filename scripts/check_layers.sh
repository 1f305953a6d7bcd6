#!/usr/bin/env bash
# The layering rules of docs/architecture.md ("Layering rules"), each one checked here and no other:
#   L0  each folder of harness/src is one library: kvc_X compiles sources of src/X/ only, and no
#       other library under harness/ compiles them;
#   L1  the harness library and the reports include nothing from generators/ (kvcgen/) or RapidCheck;
#   L2  nothing but the CLI includes the CLI's headers (cli/): not the library, the reports,
#       the generators, the plugins or the fuzz targets;
#   L3  core (harness/src/core/ and harness/src/cases/) reaches neither the reports (harness/report/)
#       nor the CLI, through any chain of includes;
#   L4  the code that builds without LibTorch stays without it, through any chain of includes: the
#       folders core/, cases/, worker/ and engine/ of harness/src, the reports, the found-case corpus
#       (harness/regressions/), the fuzz targets (fuzz/) and the `kvconform` launcher with the
#       libraries it links (kvc_cli, kvc_generators_core);
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
mapfile -t library < <(sources harness/src harness/include)
mapfile -t reports < <(sources harness/report)
mapfile -t corpus < <(sources harness/regressions)
mapfile -t generators < <(sources generators)
mapfile -t plugins < <(sources plugins examples | grep -v '^plugins/tests/')
mapfile -t fuzzers < <(sources fuzz)
# The folders of harness/src that build without LibTorch (docs/architecture.md, "The layers").
torch_free_folders=(core cases worker engine)
mapfile -t core < <(sources harness/src/core harness/src/cases)
mapfile -t torch_free_src < <(sources "${torch_free_folders[@]/#/harness/src/}")
for d in "${torch_free_folders[@]}"; do
  [ -d "harness/src/$d" ] || broken L4 "harness/src/$d: no such folder (renamed? update this script and docs/architecture.md)"
done
# The `kvconform` launcher (cli/app.h) and the two libraries it links, kvc_cli and kvc_generators_core,
# as their CMakeLists name their sources.
mapfile -t launcher < <(for file in cli/CMakeLists.txt generators/CMakeLists.txt; do
  awk '/add_(library|executable)\(/ {on = 1; sub(/.*add_(library|executable)\(/, ""); target = $1}
       on && (target == "kvc_cli" || target == "kvc_generators_core" || target == "kvconform") {
         for (i = 1; i <= NF; i++) if ($i ~ /\.cpp\)?$/) {f = $i; sub(/\)$/, "", f); print f}}
       on && /\)/ {on = 0}' "$file" | sed "s#^#$(dirname "$file")/#"
done)
[ "${#launcher[@]}" -ge 8 ] || broken L4 "found ${#launcher[@]} sources of kvconform, kvc_cli and kvc_generators_core (renamed? update this script)"

# L0: a folder is a library. Every add_library under harness/ names its sources; kvc_X takes them
# from src/X/ only, and each source sits in one library.
declare -A owner
while IFS=$'\t' read -r target src; do
  folder=${src#harness/src/}; folder=${folder%%/*}
  case "$src" in
    harness/src/*/*) [ "$target" = "kvc_$folder" ] ||
      broken L0 "$src is compiled by $target (the sources of harness/src/$folder/ belong to kvc_$folder)" ;;
  esac
  if [ -n "${owner[$src]+x}" ] && [ "${owner[$src]}" != "$target" ]; then
    broken L0 "$src is compiled by both ${owner[$src]} and $target (one folder, one library)"
  fi
  owner[$src]=$target
done < <(find harness -name CMakeLists.txt | sort | while IFS= read -r file; do
  awk '/add_library\(/ {on = 1; sub(/.*add_library\(/, ""); target = $1}
       on {for (i = 1; i <= NF; i++) if ($i ~ /\.(cpp|cc|c)\)?$/) {f = $i; sub(/\)$/, "", f); print target "\t" f}
           if ($0 ~ /\)/) on = 0}' "$file" | sed "s#\t#\t$(dirname "$file")/#"
done)
for d in harness/src/*/; do
  d=${d%/}; d=${d#harness/src/}
  [ -n "$(printf '%s\n' "${owner[@]}" | grep -x "kvc_$d")" ] || broken L0 "harness/src/$d/ is no library (no add_library(kvc_$d ...) under harness/)"
done

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
    case "$resolved" in cli/*) broken L2 "$f:${line%%:*}: includes $resolved (only the CLI includes cli/)" ;; esac
  done < <(includes_of "$f")
done

# L3 and L4 over every chain of includes; the chain's end is named.
torch_free=("${torch_free_src[@]}" "${reports[@]}" "${corpus[@]}" "${fuzzers[@]}" "${launcher[@]}")
declare -A in_core
for f in "${core[@]}"; do in_core[$f]=1; done
for f in "${torch_free[@]}"; do
  [ -f "$f" ] || { broken L3 "$f: listed in CMake but missing"; continue; }
  reach "$f"
  while IFS= read -r r; do
    if [ -n "${in_core[$f]+x}" ]; then
      case "$r" in
        harness/report/*) broken L3 "$f reaches $r (core must not include the reports)" ;;
        cli/*) broken L3 "$f reaches $r (core must not include the CLI)" ;;
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
  echo "layers point down: L0-L6 of docs/architecture.md hold (${#owner[@]} library sources, ${#core[@]} core sources, ${#library[@]} library," \
    "${#reports[@]} report, ${#generators[@]} generator, ${#plugins[@]} plugin, ${#fuzzers[@]} fuzz files)"
fi
exit $status
