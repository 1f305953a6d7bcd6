#!/usr/bin/env bash
# golden --check keeps a release's pass under the sha256 of its inputs: the dumper (golden/), the
# scenario files, the committed fixtures and the environment. This shows that the kept pass hides
# nothing: a copy of the repository's golden/ and cases/ elsewhere is the same key (a pass without
# dumping, once the checkout's own check has run), and the copy with one fixture value changed is
# dumped again and FAILs. With `crosscheck`, the same for crosscheck_masks.py's kept pass (the same
# inputs and the CPU, under the release's environment): the copy is a kept pass, and the copy with one
# fixture's SDPA mask bit flipped is checked again and FAILs.
# With `package`, that a locally patched transformers in an unchanged venv is never a kept pass: a
# copy of the venv whose transformers files are the same has the same key (golden --check's and the
# crosscheck's), one with a comment added to cache_utils.py a new key, and an editable install none;
# and that golden --check's key follows the dumper's own files (golden/kvc_inputs.py), not golden/README.md.
#   golden/check_cache_test.sh KVCONFORM ROOT [RELEASE [golden-check|crosscheck|package]]
#                                                            exit 77 (skip) without RELEASE's venv
set -euo pipefail
bin="$1" root="$2" v="${3:-5.24.0}" mode="${4:-golden-check}"
[ -x "$root/golden/.venv-$v/bin/python" ] || { echo "no golden/.venv-$v: skipped"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The copy holds golden/ (its venvs stay links into the shared cache) with three of the release's
# cases and their fixtures, the manifest cut to them: a check of the copy dumps those three (seconds,
# where the whole release took a minute), under the same key rules, by the same code.
mkdir -p "$tmp/repo/regressions" "$tmp/repo/cases" "$tmp/repo/golden/fixtures/$v"
if [ "$mode" = package ]; then  # its keys are compared with the checkout's: the whole of golden/ and cases/
  cp -r "$root/golden" "$root/cases" "$tmp/repo/"
  for suite in property differential; do
    [ -d "$root/regressions/$suite" ] && cp -r "$root/regressions/$suite" "$tmp/repo/regressions/"
  done
fi
shopt -s dotglob
[ "$mode" = package ] || for f in "$root"/golden/*; do
  [ "$(basename "$f")" = fixtures ] || cp -r "$f" "$tmp/repo/golden/"
done
shopt -u dotglob
subset=(tf_hybrid_cache dynamic_sliding_prefill_w static_sliding_prefill_w)
[ "$mode" = package ] || for c in schema "${subset[@]}"; do
  cp "$root/cases/$c.json" "$tmp/repo/cases/"
  [ "$c" = schema ] && continue
  cp "$root/golden/fixtures/$v/$c.json" "$tmp/repo/golden/fixtures/$v/"
done
[ "$mode" = package ] || python3 - "$root/golden/fixtures/$v/manifest.json" "$tmp/repo/golden/fixtures/$v/manifest.json" "${subset[@]}" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["cases"] = {k: c for k, c in m["cases"].items() if k in sys.argv[3:]}
m["skipped_by_profile"] = []
with open(sys.argv[2], "w") as f:
    json.dump(m, f, indent=1)
    f.write("\n")  # as dump.py writes it
PY
fixture="$tmp/repo/golden/fixtures/$v/${subset[0]}.json"  # it has an SDPA mask row and mask sizes at step 0
if [ "$mode" = package ]; then
  real="$(cd "$root/golden/.venv-$v" && pwd -P)"
  site_rel="$(cd "$real" && ls -d lib/python3*/site-packages)"
  fake="$tmp/venvs/$(basename "$real")"  # the same folder name: only the files may differ
  mkdir -p "$fake/$site_rel" "$fake/bin"
  cp "$real/pyvenv.cfg" "$fake/"
  ln -s "$(readlink -f "$real/bin/python")" "$fake/bin/python"
  for e in "$real/$site_rel"/*; do
    case "$(basename "$e")" in transformers|transformers-*.dist-info) ;; *) ln -s "$e" "$fake/$site_rel/" ;; esac
  done
  cp -r "$real/$site_rel"/transformers-*.dist-info "$fake/$site_rel/"
  cp -rs "$real/$site_rel/transformers" "$fake/$site_rel/transformers"  # a tree of links to the same files
  rm -f "$tmp/repo/golden/.venv-$v" && ln -s "$fake" "$tmp/repo/golden/.venv-$v"
  golden_key() { "$bin" golden --check --print-check-key --release "$v" --root "$tmp/repo" | cut -d' ' -f2-; }
  cross_key() { "$fake/bin/python" -c "import sys; sys.path.insert(0, '$tmp/repo/golden'); import crosscheck_masks as c; print(c.kept_key('$v', [], None))"; }
  same_golden="$(golden_key)" same_cross="$(cross_key)"
  real_golden="$("$bin" golden --check --print-check-key --release "$v" --root "$root" | cut -d' ' -f2-)"
  [ "$same_golden" = "$real_golden" ] ||
    { echo "FAIL: the same transformers files under a copy of the venv gave another golden --check key ($same_golden, $real_golden)"; exit 1; }
  [ "$same_cross" = "$("$real/bin/python" -c "import sys; sys.path.insert(0, '$tmp/repo/golden'); import crosscheck_masks as c; print(c.kept_key('$v', [], None))")" ] ||
    { echo "FAIL: the same transformers files under a copy of the venv gave another crosscheck key"; exit 1; }
  # golden --check's key holds the files the dump runs, not all of golden/: an edit to golden/README.md
  # keeps it; one to a module dump.py imports (kvc_inputs.py) is a new key.
  cp "$tmp/repo/golden/README.md" "$tmp/repo/golden/kvc_inputs.py" "$tmp/"
  echo "an edit" >> "$tmp/repo/golden/README.md"
  [ "$(golden_key)" = "$same_golden" ] || { echo "FAIL: an edit to golden/README.md gave golden --check another key"; exit 1; }
  echo "# an edit" >> "$tmp/repo/golden/kvc_inputs.py"
  [ "$(golden_key)" != "$same_golden" ] || { echo "FAIL: golden --check keeps its pass for an edited kvc_inputs.py, which dump.py imports"; exit 1; }
  cp "$tmp/README.md" "$tmp/kvc_inputs.py" "$tmp/repo/golden/"
  cache_utils="$fake/$site_rel/transformers/cache_utils.py"
  cp --remove-destination "$(readlink -f "$cache_utils")" "$cache_utils"
  echo "# a local patch" >> "$cache_utils"
  [ "$(golden_key)" != "$same_golden" ] || { echo "FAIL: golden --check keeps its pass for a patched cache_utils.py"; exit 1; }
  [ "$(cross_key)" != "$same_cross" ] || { echo "FAIL: the crosscheck keeps its pass for a patched cache_utils.py"; exit 1; }
  dist_info=("$fake/$site_rel"/transformers-*.dist-info)
  echo '{"url": "file:///src/transformers", "dir_info": {"editable": true}}' > "${dist_info[0]}/direct_url.json"
  golden_key | grep -q "^not kept: transformers is an editable install" ||
    { golden_key; echo "FAIL: golden --check keys an editable transformers"; exit 1; }
  [ "$(cross_key)" = None ] || { echo "FAIL: the crosscheck keys an editable transformers"; exit 1; }
  echo "OK: the same files keep one key; a patched cache_utils.py is a new key; an editable install keeps no pass"
  exit 0
fi
if [ "$mode" = crosscheck ]; then
  crosscheck() { "$tmp/repo/golden/.venv-$v/bin/python" "$tmp/repo/golden/crosscheck_masks.py" "$@"; }
  crosscheck > "$tmp/first.log" 2>&1 || { cat "$tmp/first.log"; exit 1; }
  crosscheck > "$tmp/again.log" 2>&1 || { cat "$tmp/again.log"; exit 1; }
  grep -q "a kept pass" "$tmp/again.log" || { cat "$tmp/again.log"; echo "FAIL: the unchanged copy was checked again"; exit 1; }
  python3 - "$fixture" <<'PY'  # the first SDPA mask row's first bit flipped
import json, sys
d = json.load(open(sys.argv[1]))
for layer in d["steps"][0]["layers"]:
    if isinstance(layer.get("sdpa_mask"), list):
        row = layer["sdpa_mask"][0][0]
        layer["sdpa_mask"][0][0] = ("0" if row[0] == "1" else "1") + row[1:]
        break
else:
    sys.exit("no sdpa_mask row in " + sys.argv[1])
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
  if crosscheck > "$tmp/second.log" 2>&1; then
    cat "$tmp/second.log"; echo "FAIL: crosscheck passed a changed fixture ($fixture)"; exit 1
  fi
  if grep -q "a kept pass" "$tmp/second.log"; then echo "FAIL: the changed fixture was a kept pass"; exit 1; fi
  grep "sdpa mask" "$tmp/second.log"
  echo "OK: the changed fixture was checked again and differs"
  exit 0
fi
"$bin" golden --check --release "$v" --root "$tmp/repo" > "$tmp/first.log" 2>&1 || { cat "$tmp/first.log"; exit 1; }
grep "golden --check $v: identical" "$tmp/first.log"
python3 - "$fixture" <<'PY'  # one mask size one larger: a difference the comparison judges
import json, sys
d = json.load(open(sys.argv[1]))
d["steps"][0]["layers"][0]["mask_sizes"]["kv_length"] += 1
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
if "$bin" golden --check --release "$v" --root "$tmp/repo" > "$tmp/second.log" 2>&1; then
  cat "$tmp/second.log"
  echo "FAIL: golden --check passed a changed fixture ($fixture)"
  exit 1
fi
if grep -q "dumped identical before" "$tmp/second.log"; then
  echo "FAIL: the changed fixture was a cache hit"; exit 1
fi
grep "differs: \|files differ" "$tmp/second.log"
echo "OK: the changed fixture was dumped again and differs"
