#!/usr/bin/env python3
"""Compare two fixture sets field by field (any Python 3, no dependencies).

    python3 golden/diff_versions.py golden/fixtures/4.57.6 golden/fixtures/5.24.0 [--detail]

For every case present in both sets, walks both fixtures and lists the JSON pointers whose values
differ (list indices kept, so "/steps/1/layers/0/sdpa_mask_skipped"). Version bookkeeping fields
(transformers_version, torch_version, cpu_kernels, dumper_version, api, behaviours: their
differences are printed first, once) and, unless --all, /steps/*/cache_position
(always null on 5.x, which takes no cache_position) are ignored. Prints a per-case summary, then a per-field
summary (pointers with indices replaced by *). Exit status 0 whatever the differences.
"""
import argparse
import json
import os
import re
import sys

IGNORED_TOP = {"transformers_version", "torch_version", "cpu_kernels", "dumper_version", "api", "behaviours"}
# 5.x takes no cache_position, so its fixtures record null there; --all shows it anyway
IGNORED_GENERIC = {"/steps/*/cache_position"}


def load_dir(d):
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".json") and n != "manifest.json":
            with open(os.path.join(d, n)) as f:
                out[n[:-5]] = json.load(f)
    return out


def walk(a, b, path, diffs, ignored=()):
    if generic(path) in ignored:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if not path and k in IGNORED_TOP:
                continue
            p = f"{path}/{k}"
            if k not in a or k not in b:
                diffs.append((p, a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                walk(a[k], b[k], p, diffs, ignored)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and not all(
        isinstance(x, (int, float, str, type(None))) for x in a + b
    ):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}/{i}", diffs, ignored)
    elif a != b:
        diffs.append((path, a, b))


def short(v, n=70):
    s = json.dumps(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def generic(p):
    return re.sub(r"/\d+(?=/|$)", "/*", p)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--all", action="store_true", help="also compare /steps/*/cache_position")
    ap.add_argument("--detail", action="store_true", help="print every differing pointer with both values")
    args = ap.parse_args(argv)
    A, B = load_dir(args.a), load_dir(args.b)
    va = next(iter(A.values()))["transformers_version"] if A else args.a
    vb = next(iter(B.values()))["transformers_version"] if B else args.b
    only_a = sorted(set(A) - set(B))
    only_b = sorted(set(B) - set(A))
    print(f"# fixture differences {va} -> {vb}")
    ba = next(iter(A.values())).get("behaviours", {}) if A else {}
    bb = next(iter(B.values())).get("behaviours", {}) if B else {}
    for k in sorted(set(ba) | set(bb)):
        if ba.get(k) != bb.get(k):
            print(f"behaviour {k}: {json.dumps(ba.get(k))} -> {json.dumps(bb.get(k))}")
    if only_a:
        print(f"only in {va}: {', '.join(only_a)}")
    if only_b:
        print(f"only in {vb}: {', '.join(only_b)}")
    field_cases = {}
    same = []
    for name in sorted(set(A) & set(B)):
        diffs = []
        walk(A[name], B[name], "", diffs, () if args.all else IGNORED_GENERIC)
        if not diffs:
            same.append(name)
            continue
        fields = sorted({generic(p) for p, _, _ in diffs})
        for f in fields:
            field_cases.setdefault(f, []).append(name)
        print(f"\n## {name}: {len(diffs)} differing values")
        for f in fields:
            print(f"  {f}")
        if args.detail:
            for p, x, y in diffs:
                print(f"    {p}: {short(x)} -> {short(y)}")
    print(f"\n# identical in both ({len(same)}): {', '.join(same)}")
    print("\n# fields that differ, with the cases where they do")
    for f in sorted(field_cases):
        cs = field_cases[f]
        print(f"{f}  ({len(cs)}): {', '.join(cs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
