#!/usr/bin/env bash
# Seed corpora for the fuzz targets, from the repository's own inputs: OUT/case (every scenario
# file), OUT/fixture (the manifests cut to 3 cases, the fixtures under 4 KB: small seeds keep executions fast),
# OUT/plugin_wire (well-formed child-to-host streams: load error, hello, results, end).
#   fuzz/make_corpus.sh OUT
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: make_corpus.sh OUT}"
rm -rf "$out" && mkdir -p "$out/case" "$out/fixture" "$out/plugin_wire"
for d in cases cases/generated; do
  [ -d "$root/$d" ] || continue
  find "$root/$d" -maxdepth 1 -name '*.json' ! -name schema.json -exec cp {} "$out/case/" \;
done
# The found-case corpus's scenario files (regressions/<suite>/<target>/<hash>.json; not the engine plans).
for suite in property differential plugin; do
  [ -d "$root/regressions/$suite" ] || continue
  find "$root/regressions/$suite" -mindepth 2 -maxdepth 2 -name '*.json' -exec sh -c 'cp "$1" "$2/case/regression-$(basename "$(dirname "$1")")-$(basename "$1")"' sh {} "$out" \;
done
for v in "$root"/golden/fixtures/*/; do
  name="$(basename "$v")"
  # A manifest with its first 3 cases: the whole one (114 KB) is past -max_len and slow to mutate.
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["cases"] = dict(list(m["cases"].items())[:3]); print(json.dumps(m))' \
    "$v/manifest.json" >"$out/fixture/manifest-$name.json"
  find "$v" -maxdepth 1 -name '*.json' ! -name manifest.json -size -4k -print0 |
    while IFS= read -r -d '' f; do cp "$f" "$out/fixture/$name-$(basename "$f")"; done
done
python3 - "$out/plugin_wire" <<'PY'
import struct, sys, os
out = sys.argv[1]
u64 = lambda v: struct.pack("<Q", v & (2**64 - 1))
s = lambda b: u64(len(b)) + b
hello = b"H" + s(b"ring_buffer") + s(b"a ring buffer") + u64(1) + u64(1)
def result(status=0, err=b"", a=0, b=0, o1=b"", o2=b"", guard=b""):
    return b"R" + u64(status) + s(err) + u64(a) + u64(b) + s(o1) + s(o2) + s(guard)
seeds = {
    "load_error": b"E" + s(b"cannot open shared object file"),
    "hello_only": hello + b"Z",
    "create_update_read": hello + result() + result(a=4, b=0) + result(a=2, o1=bytes(16), o2=bytes(16)) +
                          result(a=2, b=2, o1=bytes(range(16)), o2=bytes(16)) + b"Z",
    "failed_call": hello + result(status=2, err=b"bad shape") + b"Z",
    "guard_hit": hello + result(a=1, o1=b"\xff" * 8, o2=b"\xff" * 8, guard=b"update out_keys: 4 byte(s) written past the end") + b"Z",
    "truncated": (hello + result(a=3, o1=bytes(8)))[:-5],
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
PY
echo "corpus: $(ls "$out/case" | wc -l) cases, $(ls "$out/fixture" | wc -l) fixtures, $(ls "$out/plugin_wire" | wc -l) wire streams in $out"
