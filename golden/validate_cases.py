#!/usr/bin/env python3
"""Validate kvconform scenario files against cases/schema.json plus semantic checks.

    python golden/validate_cases.py                 # all of cases/*.json
    python golden/validate_cases.py cases/ more.json

Prints one line per problem, `file: /json/pointer: message` (pointer "/" is the document root),
and exits 2 if any file has a problem, 0 otherwise. Needs the `jsonschema` package (pinned in
golden/requirements-*.txt).

The hand-written cases in cases/ also follow a size policy (head_dim <= 8, total tokens <= 40),
checked here unless --no-size-policy is given; dump.py --serve does not apply it.

Every case also meets the size caps of cases/README.md ("Size caps"), the same numbers, order and
messages as the C++ loader (harness/src/cases/cases.cpp): KVC_MAX_TOKENS etc. raise one cap,
KVC_ALLOW_LARGE=1 or --allow-large lifts them all.
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_PATH = os.path.join(REPO, "cases", "schema.json")
MAX_HEAD_DIM = 8
MAX_TOTAL_TOKENS = 40

INT64_MAX = 2**63 - 1
# name, default, environment variable (harness/include/kvconform/cases.h, struct Limits)
CAPS = {
    "tokens": (65536, "KVC_MAX_TOKENS"),
    "steps": (4096, "KVC_MAX_STEPS"),
    "batch": (256, "KVC_MAX_BATCH"),
    "heads": (256, "KVC_MAX_HEADS"),
    "head_dim": (1024, "KVC_MAX_HEAD_DIM"),
    "window": (65536, "KVC_MAX_WINDOW"),
    "max_cache_len": (65536, "KVC_MAX_CACHE_LEN"),
    "elements": (2**24, "KVC_MAX_ELEMENTS"),
    "scores": (2**26, "KVC_MAX_SCORES"),
}

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


def limits(allow_large=False):
    """The caps in force: defaults raised by KVC_MAX_*, or all at INT64_MAX with KVC_ALLOW_LARGE=1."""
    if allow_large or os.environ.get("KVC_ALLOW_LARGE") == "1":
        return {k: INT64_MAX for k in CAPS}
    out = {}
    for name, (default, env) in CAPS.items():
        v = os.environ.get(env, "")
        if not v:
            out[name] = default
            continue
        if not v.isdigit() or int(v) < 1 or int(v) > INT64_MAX:
            raise ValueError(f"{env}={v}: a cap is a positive integer")
        out[name] = int(v)
    return out


class _OutOfRange:
    """A number parsed from the file that fits no C++ type; reported with its pointer."""

    def __init__(self, message):
        self.message = message


def _parse_int(text):
    v = int(text)
    if not -(2**63) <= v <= INT64_MAX:
        return _OutOfRange(f"{text} is out of the 64-bit integer range")
    return v


def _parse_float(text):
    v = float(text)
    if v in (float("inf"), float("-inf")):
        return _OutOfRange(f"number overflow parsing '{text}'")
    return v


def _parse_constant(text):  # NaN, Infinity: Python accepts them, JSON has no such literals
    return _OutOfRange(f"invalid JSON: {text} is not a JSON value")


def loads(raw):
    """json.loads with out-of-range numbers kept as markers that range_errors() names by pointer."""
    return json.loads(raw, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def range_errors(obj, path=()):
    """The first number of the document that fits no C++ type, as [(pointer, message)]."""
    if isinstance(obj, _OutOfRange):
        return [(pointer(path), obj.message)]
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        e = range_errors(v, path + (k,))
        if e:
            return e
    return []


def releases_key(case):
    """The key holding the releases a case applies to: "releases", or its deprecated alias "profiles"."""
    return "releases" if "releases" in case else "profiles"


def releases_of(case):
    """The releases a case applies to (None: all)."""
    return case.get(releases_key(case))


def pattern_length_errors(case):
    """The C++ loader checks the maxLength of strings with a pattern before the schema (std::regex
    recurses per character), and refuses "releases" given with its alias "profiles"; the same checks
    and messages here."""
    if not isinstance(case, dict):
        return []
    if "releases" in case and "profiles" in case:
        return [("/profiles", "'profiles' is the deprecated name of 'releases'; give only 'releases'")]
    checks = [("/name", case.get("name"), 128)]
    key = releases_key(case)
    if isinstance(case.get(key), list):
        checks += [(f"/{key}/{i}", p, 32) for i, p in enumerate(case[key])]
    for ptr, v, most in checks:
        if isinstance(v, str) and len(v.encode("utf-8")) > most:
            return [(ptr, f"a string of {len(v.encode('utf-8'))} characters, longer than {most}")]
    return []


def _mul(*xs):  # saturating at INT64_MAX, as the C++ loader's products
    r = 1
    for x in xs:
        r = min(r * x, INT64_MAX)
    return r


def limit_errors(case, caps):
    """The first cap the (schema-valid) case exceeds, as [(pointer, message)]; the C++ loader's
    check_limits(), same order and text."""
    def over(ptr, value, cap, unit, env):
        return [(ptr, f"{value} exceeds the cap of {cap} {unit} (raise with --allow-large or {env})")]

    for name, cap, unit, env in (("batch", "batch", "rows per batch", "KVC_MAX_BATCH"),
                                 ("heads", "heads", "heads", "KVC_MAX_HEADS"),
                                 ("kv_heads", "heads", "heads", "KVC_MAX_HEADS"),
                                 ("head_dim", "head_dim", "features per head", "KVC_MAX_HEAD_DIM"),
                                 ("window", "window", "tokens of window", "KVC_MAX_WINDOW"),
                                 ("max_cache_len", "max_cache_len", "rows of cache", "KVC_MAX_CACHE_LEN")):
        if case.get(name, 0) > caps[cap]:
            return over(f"/{name}", case[name], caps[cap], unit, env)
    steps = case["steps"]
    if len(steps) > caps["steps"]:
        return over("/steps", f"{len(steps)} steps", caps["steps"], "steps per case", "KVC_MAX_STEPS")
    bh = _mul(case["batch"], case["heads"])
    cache_len = case.get("max_cache_len", 0)
    if _mul(bh, cache_len, case["head_dim"]) > caps["elements"]:
        return over("/max_cache_len", f"batch*heads*max_cache_len*head_dim = {_mul(bh, cache_len, case['head_dim'])}",
                    caps["elements"], "elements per tensor", "KVC_MAX_ELEMENTS")
    total = 0
    for i, s in enumerate(steps):
        ptr, q = f"/steps/{i}/tokens", s.get("tokens", 0)  # a call step feeds no tokens
        if q > caps["tokens"]:
            return over(ptr, q, caps["tokens"], "tokens per case", "KVC_MAX_TOKENS")
        total += q
        if total > caps["tokens"]:
            return over(ptr, f"the case's {total} tokens so far", caps["tokens"], "tokens per case", "KVC_MAX_TOKENS")
        rows = max(total, cache_len)
        if _mul(bh, rows, case["head_dim"]) > caps["elements"]:
            return over(ptr, f"batch*heads*tokens*head_dim = {_mul(bh, rows, case['head_dim'])}", caps["elements"],
                        "elements per tensor", "KVC_MAX_ELEMENTS")
        if _mul(bh, q, rows) > caps["scores"]:
            return over(ptr, f"batch*heads*step tokens*key rows = {_mul(bh, q, rows)}", caps["scores"],
                        "attention scores per step", "KVC_MAX_SCORES")
        for j, p in enumerate(s.get("cache_position", [])):
            if p >= caps["tokens"]:
                return over(f"/steps/{i}/cache_position/{j}", f"position {p}", caps["tokens"] - 1,
                            "(positions stay below the cap of tokens per case)", "KVC_MAX_TOKENS")
    return []


def _best_errors(err):
    """For oneOf/anyOf failures report the most specific sub-error instead of the generic one."""
    if err.context:
        # group sub-errors by the alternative they belong to, pick the alternative that got deepest
        best = max(err.context, key=lambda e: (len(e.absolute_path), -len(e.context or [])))
        return _best_errors(best)
    return [err]


# The layer methods a call step names that take an argument (scenario.h, layer_methods()).
CALLS_WITH_ARGUMENT = ("crop",)


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
    total = sum(s.get("tokens", 0) for s in steps)
    lp = case.get("left_padding")
    if lp is not None:
        if len(lp) != batch:
            errs.append(("/left_padding", f"left_padding has {len(lp)} entries, batch is {batch}"))
        for i, n in enumerate(lp):
            if n > total:
                errs.append((f"/left_padding/{i}", f"{n} pad tokens but only {total} tokens in the scenario"))
    if not any(s.get("judged", True) for s in steps):
        errs.append(("/steps", 'every step is a fill step ("judged": false): the case would judge nothing'))
    for i, s in enumerate(steps):
        if "call" in s:  # a call step (cases/README.md, Call steps): the same rules as cases.cpp
            for only_updates in ("cache_position", "judged"):
                if only_updates in s:
                    errs.append((f"/steps/{i}/{only_updates}", f"a call step takes no {only_updates}"))
            takes_argument = s["call"] in CALLS_WITH_ARGUMENT
            if takes_argument and "argument" not in s:
                errs.append((f"/steps/{i}", f'{s["call"]} needs an "argument"'))
            elif not takes_argument and "argument" in s:
                errs.append((f"/steps/{i}/argument", f'{s["call"]} takes no argument'))
            continue
        if "argument" in s:
            errs.append((f"/steps/{i}/argument", "only a call step takes an argument"))
        cp = s.get("cache_position")
        if cp is not None and len(cp) != s["tokens"]:
            errs.append((f"/steps/{i}/cache_position", f"has {len(cp)} positions, step has {s['tokens']} tokens"))
    if case["cache"] == "dynamic" and "max_cache_len" in case:
        errs.append(("/max_cache_len", "max_cache_len is only meaningful for a static cache"))
    call = case.get("mask_builder_call") or {}
    absent = call.get("absent_layer_types", [])
    if all(t == "full_attention" for t in case["layer_types"] + absent) and "window" in case:
        errs.append(("/window", "window given but no sliding or chunked layer"))
    if any(t in case["layer_types"] for t in absent):
        errs.append(("/mask_builder_call/absent_layer_types", "names a layer type the cache holds"))
    if "block_sequence_ids" in call and len(call["block_sequence_ids"]) != case["batch"]:
        errs.append(("/mask_builder_call/block_sequence_ids", "needs one row per batch row"))
    if call.get("layer_idx", 0) >= len(case["layer_types"]):
        errs.append(("/mask_builder_call/layer_idx", "no such layer"))
    if call.get("attention_mask_4d") and case.get("left_padding") is None:
        errs.append(("/mask_builder_call/attention_mask_4d", "a 4D mask is made from left_padding's 2D mask"))
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
                want = batch * h * s.get("tokens", 0) * D
                if len(lst) != want:
                    errs.append((f"/inputs/explicit/{name}/{i}",
                                 f"has {len(lst)} values, expected batch*{'heads' if name == 'q' else 'kv_heads'}*tokens*head_dim = {want}"))
    if size_policy:
        if case["head_dim"] > MAX_HEAD_DIM:
            errs.append(("/head_dim", f"hand-written cases keep head_dim <= {MAX_HEAD_DIM}"))
        if total > MAX_TOTAL_TOKENS:
            errs.append(("/steps", f"hand-written cases keep total tokens <= {MAX_TOTAL_TOKENS} (has {total})"))
    return errs


def check_case_obj(case, stem=None, size_policy=False, allow_large=False):
    """Validate a parsed case. Returns a sorted list of (pointer, message); empty when valid."""
    errs = range_errors(case) or pattern_length_errors(case)
    if errs:
        return errs
    v = _get_validator()
    for e in sorted(v.iter_errors(case), key=lambda e: list(map(str, e.absolute_path))):
        for b in _best_errors(e):
            errs.append((pointer(b.absolute_path), b.message))
    if errs:
        return errs
    errs = limit_errors(case, limits(allow_large))
    if errs:
        return errs
    return semantic_errors(case, stem=stem, size_policy=size_policy)


def load_case_file(path, size_policy=False, allow_large=False):
    """Returns (case, raw_bytes, errors)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        case = loads(raw)
    except ValueError as e:
        return None, raw, [("/", f"invalid JSON: {e}")]
    except RecursionError:  # the C++ parser is iterative; Python's recurses per nesting level
        return None, raw, [("/", "invalid JSON: nested too deeply for Python's parser")]
    stem = os.path.splitext(os.path.basename(path))[0]
    return case, raw, check_case_obj(case, stem=stem, size_policy=size_policy, allow_large=allow_large)


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
    ap.add_argument("--allow-large", action="store_true", help="lift the size caps (cases/README.md)")
    args = ap.parse_args(argv)
    try:
        limits()
    except ValueError as e:
        print(f"validate_cases: {e}", file=sys.stderr)
        return 2
    files = expand_paths(args.paths)
    bad = 0
    names = {}
    for path in files:
        case, _, errs = load_case_file(path, size_policy=not args.no_size_policy, allow_large=args.allow_large)
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
