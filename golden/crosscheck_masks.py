#!/usr/bin/env python3
"""Cross-check: for every case and every layer, the masks recorded in the fixtures (built by
dump.py with sdpa_mask / eager_mask directly) must equal what the installed release's own
create_causal_mask / create_sliding_window_causal_mask / create_chunked_causal_mask return, step by
step, for a real StaticCache / DynamicCache built from a model config the way a model builds it.

    golden/.venv-<version>/bin/python golden/crosscheck_masks.py [--fixtures DIR] [case files or dirs ...]

Default cases: cases/, cases/generated/ and the found-case corpus's regressions/property/*/ and
regressions/differential/*/. Default fixtures:
golden/fixtures/<installed transformers version>/; a case without a fixture there is dumped afresh
with dump.py (so the dumper itself is checked). Per step, before the update, and per layer:

  - sdpa (config._attn_implementation "sdpa"): None exactly where the fixture says the mask was
    skipped (`sdpa_mask_skipped`), else the same bool rows as `sdpa_mask`;
  - eager: the additive mask's sha256 equals `eager_mask.sha256`;
  - the cache layer classes equal the fixture's `layers[].class`;

then the real cache is updated (Cache.update with the case's inputs) like a model does. A release
whose builders take `layer_idx` is asked for each layer; an older one sizes the mask from the first
layer of the same kind (sliding or not), which is only compared while both layers are alive and of
one class (4.56 sizes a chunked layer's mask from a sliding layer of another class: such layer-steps
are counted as not comparable).

One line per mismatch (`file: step S layer L (type): what`), then
`crosscheck VERSION: N cases, M layer-steps checked, K mismatches`. Exit 1 on any mismatch, 2 on a
bad case file or usage, 0 otherwise.
"""
import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import validate_cases  # noqa: E402

# torch and the release's transformers are imported by load_release(): a kept pass needs neither, and
# their import is most of a kept run's cost.
torch = transformers = cache_utils = masking_utils = dump = Config = None
CREATE = {}


def load_release():
    global torch, transformers, cache_utils, masking_utils, dump, Config
    import cpu_pin
    cpu_pin.apply()  # before torch, as dump.py (the fixtures' CPU kernel pin)
    import torch
    import transformers
    from transformers import cache_utils, masking_utils
    import dump
    CREATE.update({
        "full_attention": masking_utils.create_causal_mask,
        "sliding_attention": masking_utils.create_sliding_window_causal_mask,
        "chunked_attention": masking_utils.create_chunked_causal_mask,
    })
    Config = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig


def model_config(case, impl):
    """What a hybrid decoder's config holds for its cache and masks."""
    cfg = Config()
    cfg.layer_types = list(case["layer_types"])
    cfg.num_hidden_layers = len(case["layer_types"])
    cfg.sliding_window = case.get("window")
    cfg.attention_chunk_size = case.get("window")
    cfg._attn_implementation = impl
    return cfg


def model_cache(case):
    cfg = model_config(case, "sdpa")
    if case["cache"] == "static":
        return cache_utils.StaticCache(config=cfg, max_cache_len=case["max_cache_len"])
    return cache_utils.DynamicCache(config=cfg)


def load_fixture(fixtures_dir, case, raw):
    path = os.path.join(fixtures_dir, case["name"] + ".json") if fixtures_dir else None
    if path and os.path.exists(path):
        with open(path) as f:
            fx = json.load(f)
        if fx.get("case_sha256") != dump.sha256_bytes(raw):
            return fx, f"fixture {path} is stale (case_sha256 differs from the case file)"
        return fx, None
    return dump.dump_case(case, raw), None


UNCOMPARABLE = [0]
# Masks of full layers after a layer-API call (reset, crop) under the max_length API (before 5.14): from
# 5.4 to 5.13 the builders take their query offset from past_key_values.get_seq_length(), layer 0's
# count, where the layer-level masks take the layer's own (as from 5.14 get_query_offset(layer_idx)
# does). The two differ once a call leaves the layers with different counts: a reset keeps a dynamic
# full layer's zeroed rows (an upstream bug the fixtures reproduce) while a sliding layer 0 counts from
# 0 again, and a sliding layer refuses a crop its full layers take. The fixtures record the builders'
# own masks too (mask_builders, golden replay judges them); the count is printed.
UNCOMPARABLE_EAGER_AFTER_CALL = [0]


def max_length_api():
    from importlib.metadata import version as installed
    return tuple(int(x) for x in installed("transformers").split(".")[:2]) < (5, 14)


def check(case, raw, fixtures_dir):
    """-> (layer-steps checked, [mismatch text])"""
    A = dump.api()
    fx, stale = load_fixture(fixtures_dir, case, raw)
    problems = [stale] if stale else []
    lts = case["layer_types"]
    cache = model_cache(case)
    classes = [type(l).__name__ for l in cache.layers]
    if classes != [l["class"] for l in fx["layers"]]:
        problems.append(f"layer classes: real cache {classes} vs fixture {[l['class'] for l in fx['layers']]}")
    dtype = dump.DTYPES[case["dtype"]]
    B = case["batch"]
    total = sum(s.get("tokens", 0) for s in case["steps"])
    lp = case.get("left_padding")
    full_2d = None
    if lp is not None:
        full_2d = torch.tensor([[0] * min(n, total) + [1] * (total - min(n, total)) for n in lp], dtype=torch.long)
    cfgs = {impl: model_config(case, impl) for impl in ("sdpa", "eager")}
    dead = [False] * len(lts)
    is_sliding = list(cache.is_sliding)
    checked = 0
    seen = fed = 0  # positions, and tokens fed (the inputs' index), as dump.py counts them
    called = False  # a layer-API call step came before this step
    old_api = max_length_api()
    for si, step in enumerate(case["steps"]):
        if "call" in step:
            called = True  # reset, crop, activate_past_recording on the model's cache layers, as dump.py
            for li in range(len(lts)):
                if not dead[li]:
                    try:
                        dump.call_method(cache.layers[li], step)
                    except Exception:
                        pass
            seen = dump.positions_after_call(step, seen)
            fed = 0 if step["call"] == "reset" else fed
            continue
        q = step["tokens"]
        cp = torch.tensor(step.get("cache_position") or list(range(seen, seen + q)), dtype=torch.long)
        am = full_2d[:, : seen + q] if full_2d is not None else None
        embeds = torch.zeros(B, q, 1, dtype=dtype)
        for li, lt in enumerate(lts):
            rec = fx["steps"][si]["layers"][li]
            fn = CREATE[lt]
            takes_idx = "layer_idx" in dump.params(fn)
            # the layer a builder without layer_idx sizes its mask from
            used = li if takes_idx else next(j for j in range(len(lts)) if is_sliding[j] == is_sliding[li])
            used_rec = fx["steps"][si]["layers"][used]
            if dead[li] or dead[used] or "skipped" in rec or "skipped" in used_rec:
                continue
            if type(cache.layers[used]) is not type(cache.layers[li]):
                # 4.56 sizes a chunked layer's mask from the first sliding layer, a SlidingWindowLayer
                # whose get_mask_sizes differs: the builder cannot be asked about this layer
                UNCOMPARABLE[0] += 1
                continue
            where = f"step {si} layer {li} ({lt})"
            got = {}
            for impl in ("sdpa", "eager"):
                try:
                    got[impl] = dump.create_mask(fn, cfgs[impl], embeds, am, cp, cache, li if takes_idx else None)
                except Exception as e:
                    got[impl] = e
            checked += 1
            if rec.get("mask_sizes") is None or rec["sdpa_mask_skipped"] is None:
                # the dumper recorded a failure before or while building masks: the builder must fail too
                if not all(isinstance(g, Exception) for g in got.values()):
                    problems.append(f"{where}: fixture has no masks ({rec.get('errors')}) but create_*_mask built one")
                continue
            s = got["sdpa"]
            if isinstance(s, Exception):
                problems.append(f"{where}: sdpa create_*_mask raised {type(s).__name__}: {s}")
            elif (s is None) != bool(rec["sdpa_mask_skipped"]):
                problems.append(f"{where}: sdpa skip: create_*_mask {'None' if s is None else 'a mask'}, "
                                f"fixture sdpa_mask_skipped={rec['sdpa_mask_skipped']}")
            elif s is not None and dump.mask_strings(s) != rec["sdpa_mask"]:
                if called and old_api and lt == "full_attention":
                    UNCOMPARABLE_EAGER_AFTER_CALL[0] += 1
                else:
                    problems.append(f"{where}: sdpa mask: create_*_mask {dump.mask_strings(s)} vs fixture {rec['sdpa_mask']}")
            e = got["eager"]
            want = (rec.get("eager_mask") or {}).get("sha256")
            if isinstance(e, Exception):
                problems.append(f"{where}: eager create_*_mask raised {type(e).__name__}: {e}")
            elif e is None or dump.sha256_bytes(dump.tensor_bytes(e)) != want:
                if called and old_api and lt == "full_attention":
                    UNCOMPARABLE_EAGER_AFTER_CALL[0] += 1
                else:
                    problems.append(f"{where}: eager mask differs from the fixture's eager_mask")
        for li, lt in enumerate(lts):
            if dead[li]:
                continue
            q64, k64, v64 = dump.build_inputs(case, li, si, fed, q)
            k, v = k64.to(dtype), v64.to(dtype)
            try:
                if A.behaviours["cache_api"] == "cache_position":
                    cache.update(k, v, li, cache_kwargs={"cache_position": cp})
                else:
                    cache.update(k, v, li)
            except Exception:
                dead[li] = True
            rec = fx["steps"][si]["layers"][li]
            fixture_dead = "skipped" in rec or any(x["phase"] == "update" for x in rec.get("errors") or [])
            if dead[li] != fixture_dead:
                problems.append(f"step {si} layer {li} ({lt}): Cache.update {'failed' if dead[li] else 'worked'}, "
                                f"the fixture says it {'failed' if fixture_dead else 'worked'}")
                dead[li] = True
        seen += q
        fed += q
    return checked, problems


def default_paths():
    found = [os.path.join(ROOT, "regressions", suite, t) for suite in ("property", "differential")
             if os.path.isdir(os.path.join(ROOT, "regressions", suite))
             for t in sorted(os.listdir(os.path.join(ROOT, "regressions", suite)))]
    return [p for p in [os.path.join(ROOT, "cases", d) for d in ("", "generated")] + found if os.path.isdir(p)]


def cache_dir():
    if os.environ.get("KVC_CACHE"):
        return os.path.join(os.environ["KVC_CACHE"], "crosscheck")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kvconform", "crosscheck")


def installed_sources():
    """(path, sha256) of every .py file of the installed transformers package, found without importing
    it; None for an editable install, whose source tree can change under an unchanged environment."""
    import importlib.metadata
    import importlib.util
    direct = importlib.metadata.distribution("transformers").read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        return None
    package = os.path.dirname(importlib.util.find_spec("transformers").origin)
    out = []
    for top, dirs, names in os.walk(package):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(".py"):
                with open(os.path.join(top, name), "rb") as f:
                    out.append((os.path.relpath(os.path.join(top, name), package), hashlib.sha256(f.read()).hexdigest()))
    return out


def kept_key(version, files, fixtures_dir):
    """sha256 of everything a check reads: golden/'s files (this script and the dumper), the case files,
    the fixtures, the release's environment folder (named by the sha256 of its pins) and the content of
    the transformers package installed there (a locally patched file is a new key), the CPU. None: no
    pass is kept (an editable transformers)."""
    sources = installed_sources()
    if sources is None:
        return None
    lines = ["crosscheck kept pass 2", f"transformers {version}",
             f"environment {os.path.basename(os.path.realpath(sys.prefix))}"]
    lines += [f"transformers/{rel} {digest}" for rel, digest in sources]
    with open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else open(os.devnull) as cpu:
        lines += [l.strip() for l in cpu if l.startswith(("model name", "flags"))][:2]

    def add(name, path):
        with open(path, "rb") as f:
            lines.append(f"{name} {hashlib.sha256(f.read()).hexdigest()}")
    for name in sorted(os.listdir(HERE)):
        if os.path.isfile(os.path.join(HERE, name)):
            add("golden/" + name, os.path.join(HERE, name))
    for path in files:
        add(os.path.relpath(path, ROOT), path)
    if fixtures_dir:
        for top, dirs, names in sorted(os.walk(fixtures_dir)):
            dirs.sort()
            for name in sorted(names):
                add("fixture " + os.path.relpath(os.path.join(top, name), fixtures_dir), os.path.join(top, name))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description="masks of the fixtures vs transformers' own create_*_mask builders")
    ap.add_argument("paths", nargs="*", help="case files or directories (default: cases/, cases/generated/, regressions/property/*/, regressions/differential/*/)")
    ap.add_argument("--fixtures", help="fixture folder (default: golden/fixtures/<installed version>/)")
    ap.add_argument("--no-cache", action="store_true",
                    help="check again even where the same inputs (see kept_key) were checked clean before")
    args = ap.parse_args(argv)
    from importlib.metadata import version as installed
    version = installed("transformers")
    fixtures_dir = args.fixtures or os.path.join(HERE, "fixtures", version)
    if not os.path.isdir(fixtures_dir):
        fixtures_dir = None
    files = []
    for p in args.paths or default_paths():
        # a directory means its own *.json, as dump.py is given cases/ and cases/generated/ separately
        files += validate_cases.expand_paths([p])
    files = sorted(set(files))
    if not files:
        print("crosscheck: no case files", file=sys.stderr)
        return 2
    key = kept_key(version, files, fixtures_dir)
    if key is None:
        print(f"crosscheck {version}: checking (no pass is kept for an editable transformers)")
        args.no_cache = True
    kept = os.path.join(cache_dir(), key or "-")
    if not args.no_cache and os.path.isfile(kept):
        with open(kept) as f:
            said = f.read()
        print(f"crosscheck {version}: a kept pass (its inputs checked clean before: key {key[:16]} in {cache_dir()};"
              " --no-cache checks again)")
        print(said, end="")
        return 0
    load_release()
    torch.set_num_threads(1)
    out = []

    def say(line):
        print(line)
        out.append(line + "\n")
    n_cases = n_checked = 0
    mismatches = 0
    bad_input = False
    for p in files:
        case, raw, errs = validate_cases.load_case_file(p)
        if errs:
            for ptr, msg in errs:
                say(f"{p}: {ptr}: {msg}")
            bad_input = True
            continue
        if not dump.applies(case):
            continue
        n_cases += 1
        try:
            checked, problems = check(case, raw, fixtures_dir)
        except Exception as e:  # a crosscheck that cannot run is a mismatch, named by case
            checked, problems = 0, [f"crosscheck failed: {type(e).__name__}: {e}"]
        n_checked += checked
        for prob in problems:
            say(f"{os.path.relpath(p, ROOT)}: {prob}")
        mismatches += len(problems)
    if UNCOMPARABLE_EAGER_AFTER_CALL[0]:
        say(f"crosscheck {version}: {UNCOMPARABLE_EAGER_AFTER_CALL[0]} masks of full layers after a layer-API call "
            "(sdpa or eager) not compared with the layer-level masks: 5.4-5.13's builders place the queries by layer 0's "
            "count, which the call left different (the fixtures' mask_builders record the builders' masks)")
    if UNCOMPARABLE[0]:
        say(f"crosscheck {version}: {UNCOMPARABLE[0]} layer-steps not comparable (the builder sizes the mask "
            "from a layer of another class)")
    say(f"crosscheck {version}: {n_cases} cases, {n_checked} layer-steps checked, {mismatches} mismatches")
    if bad_input:
        return 2
    if mismatches:
        return 1
    if not args.no_cache:
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = f"{kept}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.writelines(out)
        os.replace(tmp, kept)
    return 0

if __name__ == "__main__":
    sys.exit(main())
