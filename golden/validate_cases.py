#!/usr/bin/env python3
"""Validate kvconform scenario files against cases/schema.json plus semantic checks.

    python golden/validate_cases.py                 # all of cases/*.json
    python golden/validate_cases.py cases/ more.json

Prints one line per problem, `file: /json/pointer: message` (pointer "/" is the document root),
and exits 2 if any file has a problem, 0 otherwise. Needs the `jsonschema` package (pinned in
golden/requirements-*.txt).

The hand-written cases in cases/ also follow a size policy (head_dim <= 8, total tokens <= 40),
checked here unless --no-size-policy is given; dump.py --serve does not apply it.
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_PATH = os.path.join(REPO, "cases", "schema.json")
MAX_HEAD_DIM = 8
MAX_TOTAL_TOKENS = 40

_validator = None


def _get_validator():
    global _validator
    if _validator is None:
        import jsonschema

        with open(SCHEMA_PATH, "rb") as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _validator = cls(schema)
    return _validator


def pointer(path):
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


def _best_errors(err):
    """For oneOf/anyOf failures report the most specific sub-error instead of the generic one."""
    if err.context:
        # group sub-errors by the alternative they belong to, pick the alternative that got deepest
        best = max(err.context, key=lambda e: (len(e.absolute_path), -len(e.context or [])))
        return _best_errors(best)
    return [err]


def semantic_errors(case, stem=None, size_policy=False):
    """Checks the schema cannot express. Returns a list of (pointer, message)."""
    errs = []
    if stem is not None and case.get("name") != stem:
        errs.append(("/name", f"name {case.get('name')!r} must equal the file stem {stem!r}"))
    heads, kv_heads = case["heads"], case["kv_heads"]
    if heads % kv_heads != 0:
        errs.append(("/kv_heads", f"kv_heads {kv_heads} does not divide heads {heads}"))
    batch = case["batch"]
    steps = case["steps"]
    total = sum(s["tokens"] for s in steps)
    lp = case.get("left_padding")
    if lp is not None:
        if len(lp) != batch:
            errs.append(("/left_padding", f"left_padding has {len(lp)} entries, batch is {batch}"))
        for i, n in enumerate(lp):
            if n > total:
                errs.append((f"/left_padding/{i}", f"{n} pad tokens but only {total} tokens in the scenario"))
    for i, s in enumerate(steps):
        cp = s.get("cache_position")
        if cp is not None and len(cp) != s["tokens"]:
            errs.append((f"/steps/{i}/cache_position", f"has {len(cp)} positions, step has {s['tokens']} tokens"))
    if case["cache"] == "dynamic" and "max_cache_len" in case:
        errs.append(("/max_cache_len", "max_cache_len is only meaningful for a static cache"))
    if all(t == "full_attention" for t in case["layer_types"]) and "window" in case:
        errs.append(("/window", "window given but no sliding or chunked layer"))
    ex = case["inputs"].get("explicit")
    if ex is not None:
        D = case["head_dim"]
        for name in ("q", "k", "v"):
            if name not in ex:
                continue
            h = heads if name == "q" else kv_heads
            vals = ex[name]
            if len(vals) != len(steps):
                errs.append((f"/inputs/explicit/{name}", f"has {len(vals)} step lists, scenario has {len(steps)} steps"))
                continue
            for i, (lst, s) in enumerate(zip(vals, steps)):
                want = batch * h * s["tokens"] * D
                if len(lst) != want:
                    errs.append((f"/inputs/explicit/{name}/{i}",
                                 f"has {len(lst)} values, expected batch*{'heads' if name == 'q' else 'kv_heads'}*tokens*head_dim = {want}"))
    if size_policy:
        if case["head_dim"] > MAX_HEAD_DIM:
            errs.append(("/head_dim", f"hand-written cases keep head_dim <= {MAX_HEAD_DIM}"))
        if total > MAX_TOTAL_TOKENS:
            errs.append(("/steps", f"hand-written cases keep total tokens <= {MAX_TOTAL_TOKENS} (has {total})"))
    return errs


def check_case_obj(case, stem=None, size_policy=False):
    """Validate a parsed case. Returns a sorted list of (pointer, message); empty when valid."""
    v = _get_validator()
    errs = []
    for e in sorted(v.iter_errors(case), key=lambda e: list(map(str, e.absolute_path))):
        for b in _best_errors(e):
            errs.append((pointer(b.absolute_path), b.message))
    if errs:
        return errs
    return semantic_errors(case, stem=stem, size_policy=size_policy)


def load_case_file(path, size_policy=False):
    """Returns (case, raw_bytes, errors)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        case = json.loads(raw)
    except ValueError as e:
        return None, raw, [("/", f"invalid JSON: {e}")]
    stem = os.path.splitext(os.path.basename(path))[0]
    return case, raw, check_case_obj(case, stem=stem, size_policy=size_policy)


def expand_paths(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            for n in sorted(os.listdir(p)):
                if n.endswith(".json") and n != "schema.json":
                    out.append(os.path.join(p, n))
        else:
            out.append(p)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=[os.path.join(REPO, "cases")])
    ap.add_argument("--no-size-policy", action="store_true", help="skip the hand-written size policy")
    args = ap.parse_args(argv)
    files = expand_paths(args.paths)
    bad = 0
    names = {}
    for path in files:
        case, _, errs = load_case_file(path, size_policy=not args.no_size_policy)
        if case is not None and not errs:
            prev = names.get(case["name"])
            if prev is not None:
                errs = [("/name", f"duplicate case name, also in {prev}")]
            names[case["name"]] = path
        for ptr, msg in errs:
            print(f"{path}: {ptr}: {msg}")
        bad += bool(errs)
    if not files:
        print("validate_cases: no case files found", file=sys.stderr)
        return 2
    print(f"validate_cases: {len(files)} files, {bad} with errors", file=sys.stderr)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
