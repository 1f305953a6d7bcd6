#!/usr/bin/env python3
"""Behaviour timeline: which transformers release does what, measured release by release.

    python3 golden/timeline.py [--releases 4.56.0 5.0.0 ...] [--write]
    python3 golden/timeline.py --check-fixtures golden/fixtures

Sweep (the default): for every transformers release from 4.56.0 to the newest one pip lists, install
it into a cached environment, run golden/dump.py on the PROBES below (which also records the
release's `behaviours`, detected by calling it), and print, release after release, which behaviour
and which fixture field of which probe changed from the previous release. --write stores the
result as golden/behaviours.json (release -> behaviours) and golden/behaviours.md. With --releases,
--write measures those releases alone (and their neighbours in the written timeline, from the cache
where a sweep left them) and merges them into behaviours.json and behaviours.md: the record added,
the "what changed" entries through it recomputed; exit 3 when a merged release changes a behaviour
(the C++ reference's release table must then model it). Each release's
probe dump stays in the cache (fixtures/<release>/): --assemble [--write] redoes the comparison
from those alone, e.g. after sweeping disjoint --releases ranges in parallel.

Environments (under $KVCONFORM_CACHE, default ~/.cache/kvconform): a release is installed with
`pip install --no-deps --target tf/<release>` and run with PYTHONPATH=tf/<release> on a base venv
that holds torch 2.13.0 and every other dependency. A base is built from a golden/requirements-*.txt
without its transformers line (`pip install --no-deps`) when its pins satisfy every Requires-Dist of
the release; otherwise a base is resolved by pip for that release (torch==2.13.0 transformers==R
jsonschema, then transformers uninstalled) and reused by later releases it satisfies.

--check-fixtures DIR: every DIR/<release>/ fixture (and manifest) must record exactly the behaviours
golden/behaviours.json holds for that release. Needs only the standard library (CI runs it).

Exit status: 0 fine, 1 a fixture disagrees (--check-fixtures) or a release failed to dump, 2 bad usage,
3 a merged release changes a behaviour (--releases X --write; written all the same).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEHAVIOURS_JSON = os.path.join(HERE, "behaviours.json")
BEHAVIOURS_MD = os.path.join(HERE, "behaviours.md")
FIRST = (4, 56, 0)

# Hand-picked cases of cases/: static/dynamic x full/sliding/chunked, decode across the window,
# multi-token steps after the window is full, left padding, prefill on static caches, the
# max_cache_len < window capacity, explicit cache_position, window 1.
PROBES = [
    "static_full_baseline",
    "dynamic_full_baseline",
    "static_sliding_decode_across_boundary",
    "dynamic_sliding_decode_across_boundary",
    "static_sliding_multi_token_after_full_longer",
    "dynamic_sliding_multi_token_after_full_longer",
    "static_sliding_multi_token_after_full_equal",
    "static_sliding_update_crossing_window",
    "static_sliding_prefill_2w_plus_1",
    "dynamic_sliding_prefill_w_plus_1",
    "static_chunked_prefill_2w_plus_1",
    "dynamic_chunked_decode_across_chunks",
    "static_chunked_batch_left_padding",
    "static_sliding_batch_left_padding",
    "dynamic_sliding_batch_left_padding",
    "static_hybrid_left_padding_no_pad_row",
    "gemma2_static_hybrid",
    "llama4_static_chunked_hybrid",
    "static_sliding_max_cache_len_below_window",
    "tf_static_cache",
    "tf_chunked_mask_left_padding_large_prefill",
    "upstream_48280_returned_rows_vs_mask_sizes",
]

# Not behaviour: provenance, and cache_position (null whenever the release has no such argument).
IGNORED_TOP = {"transformers_version", "torch_version", "cpu_kernels", "dumper_version", "api", "behaviours", "case_sha256"}

BEHAVIOUR_DOC = {
    "cache_api": (
        "`cache_position`: `layer.update(k, v, cache_kwargs={\"cache_position\": positions})`, "
        "`get_mask_sizes(cache_position)`, `sdpa_mask(cache_position=...)`; the caller says where each token goes. "
        "`query_length`: `layer.update(k, v)`, `get_mask_sizes(query_length)`, `sdpa_mask(q_length, q_offset)` with "
        "`q_offset = cache.get_query_offset(layer)` (the layer's own counter). Detected from the call signatures."
    ),
    "sliding_layer": (
        "`pre_merge`: a `StaticCache` built from a config gives sliding layers a `SlidingWindowLayer` and chunked "
        "layers a `ChunkedSlidingLayer` (different update and get_mask_sizes). `merged`: both get a "
        "`StaticSlidingWindowLayer`. Detected by building `StaticCache(config(layer_types=[sliding, chunked]))` "
        "and comparing the two layers' classes."
    ),
    "sdpa_skip": (
        "the `allow_is_causal_skip` that `create_causal_mask` / `create_sliding_window_causal_mask` / "
        "`create_chunked_causal_mask` pass to `sdpa_mask`. `not_compileable`: never on a compileable (static) "
        "cache. `not_compileable_decode`: not on a compileable cache's q_length == 1 step, allowed on its "
        "multi-token steps. Always allowed on a dynamic cache. Detected by calling `create_causal_mask` "
        "(sdpa) on a real `StaticCache` of 4 rows: a 4-token prefill (skippable: kv_length == q_length) and a "
        "1-token step after 3 tokens."
    ),
    "sdpa_skip_empty_cache": (
        "true when `sdpa_mask` (skip allowed) returns None for 2 queries at positions 0, 1 over 4 key rows whose "
        "last 2 are the unwritten tail (2D mask of the 2 seen tokens, or none): the first query is at position 0 "
        "and the only padding is the right tail of the key range, so SDPA's upper-left `is_causal` is exact. "
        "false: only q_length == 1 or kv_length == q_length (no padding) skip."
    ),
    "static_seq_length": (
        "`StaticLayer.get_seq_length()` after one non-zero and one all-zero row: `nonzero_rows` counts the rows "
        "whose keys (batch 0, head 0) are not all zero (1); `cumulative` counts the tokens fed (2)."
    ),
}


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def cache_root():
    return os.environ.get("KVCONFORM_CACHE", os.path.expanduser("~/.cache/kvconform"))


def log(msg):
    print(msg, flush=True)


def run(cmd, **kw):
    """pip and venv calls: quiet unless they fail."""
    kw.pop("stdout", None)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        lines = [l for l in (p.stdout + p.stderr).splitlines() if "is ignored: it is neither" not in l]
        raise subprocess.CalledProcessError(p.returncode, cmd, "\n".join(lines[-20:]))
    return p


# --------------------------------------------------------------------------------------------
# releases and environments
# --------------------------------------------------------------------------------------------
def list_releases():
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "transformers"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"Available versions: (.*)", out)
    vs = [v.strip() for v in m.group(1).split(",")]
    vs = [v for v in vs if re.fullmatch(r"\d+\.\d+\.\d+", v) and vkey(v) >= FIRST]
    return sorted(vs, key=vkey)


def wheel_requirements(target):
    """Requires-Dist (no extras) of the transformers installed in target."""
    from packaging.requirements import Requirement
    dist = [d for d in os.listdir(target) if d.startswith("transformers-") and d.endswith(".dist-info")]
    reqs = []
    with open(os.path.join(target, dist[0], "METADATA"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("Requires-Dist:"):
                r = Requirement(line.split(":", 1)[1].strip())
                if r.marker is None or r.marker.evaluate({"extra": ""}):
                    reqs.append(r)
    return reqs


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path):
    pins = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                n, v = line.split("==", 1)
                pins[norm(n)] = v.strip()
    return pins


def satisfies(pins, reqs):
    return all(norm(r.name) in pins and r.specifier.contains(pins[norm(r.name)], prereleases=True) for r in reqs)


class Envs:
    def __init__(self):
        self.root = cache_root()
        os.makedirs(os.path.join(self.root, "tf"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "base"), exist_ok=True)
        self.bases = []  # (name, pins)
        for f in sorted(os.listdir(HERE)):
            m = re.fullmatch(r"requirements-(.+)\.txt", f)
            if m:
                pins = read_pins(os.path.join(HERE, f))
                pins.pop("transformers", None)
                self.bases.append(("pinned-" + m.group(1), pins, os.path.join(HERE, f)))
        for name in sorted(os.listdir(os.path.join(self.root, "base"))):
            fz = os.path.join(self.root, "base", name, "freeze.txt")
            if name.startswith("resolved-") and os.path.exists(fz):
                pins = read_pins(fz)
                self.bases.append((name, pins, None))

    def release(self, v):
        target = os.path.join(self.root, "tf", v)
        if not os.path.exists(os.path.join(target, ".done")):
            shutil.rmtree(target, ignore_errors=True)
            run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target,
                 f"transformers=={v}"], stdout=subprocess.DEVNULL)
            open(os.path.join(target, ".done"), "w").close()
        return target

    def base_for(self, v, target):
        reqs = wheel_requirements(target)
        for name, pins, req_file in self.bases:
            if satisfies(pins, reqs):
                return self.build_base(name, req_file, None)
        name = "resolved-" + v
        py = self.build_base(name, None, v)
        self.bases.append((name, read_pins(os.path.join(self.root, "base", name, "freeze.txt")), None))
        return py

    def build_base(self, name, req_file, resolve_for):
        d = os.path.join(self.root, "base", name)
        py = os.path.join(d, "bin", "python")
        if os.path.exists(os.path.join(d, ".done")):
            return py
        shutil.rmtree(d, ignore_errors=True)
        log(f"timeline: building base environment {name}")
        run([sys.executable, "-m", "venv", d])
        if req_file:
            lines = [l for l in open(req_file) if not l.lower().startswith("transformers==")]
            tmp = os.path.join(d, "requirements.txt")
            with open(tmp, "w") as f:
                f.writelines(lines)
            run([py, "-m", "pip", "install", "--quiet", "--no-deps", "-r", tmp], stdout=subprocess.DEVNULL)
        else:
            run([py, "-m", "pip", "install", "--quiet", "torch==2.13.0", f"transformers=={resolve_for}", "jsonschema"],
                stdout=subprocess.DEVNULL)
            run([py, "-m", "pip", "uninstall", "--quiet", "-y", "transformers"], stdout=subprocess.DEVNULL)
        fz = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(d, "freeze.txt"), "w") as f:
            f.write(fz)
        open(os.path.join(d, ".done"), "w").close()
        return py


# --------------------------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------------------------
def probe_files():
    files = []
    for p in PROBES:
        path = os.path.join(ROOT, "cases", p + ".json")
        if not os.path.exists(path):
            raise SystemExit(f"timeline: probe case {path} is missing")
        files.append(path)
    return files


def dump_release(envs, v):
    """-> (behaviours or None, {case: fixture}, error text or None)"""
    pinned = os.path.join(HERE, f".venv-{v}", "bin", "python")
    if os.path.exists(pinned):  # a pinned release's own environment (golden/setup_env.sh): nothing to install
        py, env = pinned, dict(os.environ)
        env.pop("PYTHONPATH", None)
    else:
        target = envs.release(v)
        py = envs.base_for(v, target)
        env = dict(os.environ, PYTHONPATH=target, PYTHONDONTWRITEBYTECODE="1")
    out = os.path.join(envs.root, "fixtures", v)
    cmd = [py, os.path.join(HERE, "dump.py"), "--cases", *probe_files(), "--out", out]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, {}, (p.stdout + p.stderr).strip()[-2000:]
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    if man["transformers_version"] != v:
        return None, {}, f"imported transformers {man['transformers_version']}, not {v}"
    fixtures = {}
    for c in PROBES:
        with open(os.path.join(out, c + ".json")) as f:
            fixtures[c] = json.load(f)
    return man["behaviours"], fixtures, None


def walk(a, b, path, diffs):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if not path and k in IGNORED_TOP:
                continue
            p = f"{path}/{k}"
            if k not in a or k not in b:
                diffs.append(p)
            else:
                walk(a[k], b[k], p, diffs)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and not all(
        isinstance(x, (int, float, str, type(None))) for x in a + b
    ):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}/{i}", diffs)
    elif a != b:
        diffs.append(path)


def generic(p):
    return re.sub(r"/\d+(?=/|$)", "/*", p)


def fixture_changes(prev, cur):
    """{field (indices as *): [probe, ...]} for the probes whose fixture differs."""
    out = {}
    for c in PROBES:
        if c not in prev or c not in cur:
            continue
        a, b = prev[c], cur[c]
        diffs = []
        # cache_position is null where the release takes none: that is the cache_api behaviour, not a field change
        walk(a, b, "", diffs)
        for f in sorted({generic(d) for d in diffs if generic(d) != "/steps/*/cache_position"}):
            out.setdefault(f, []).append(c)
    return out


def sweep(releases, write):
    envs = Envs()
    results = {}
    changes = []  # (release, previous, behaviour changes, field changes)
    failed = []
    prev_v = prev_b = prev_fx = None
    for v in releases:
        t = time.time()
        try:
            b, fx, err = dump_release(envs, v)
        except subprocess.CalledProcessError as e:
            b, fx, err = None, {}, f"environment: {e}\n{e.output}"
        if err:
            failed.append(v)
            log(f"{v}: FAILED ({time.time() - t:.0f} s): {err}")
            continue
        results[v] = b
        line = f"{v}: {json.dumps(b, sort_keys=False)} ({time.time() - t:.0f} s)"
        if prev_v is not None:
            bch = {k: (prev_b[k], b[k]) for k in b if prev_b.get(k) != b[k]}
            fch = fixture_changes(prev_fx, fx)
            if bch or fch:
                changes.append((v, prev_v, bch, fch))
                line += f"\n  changed since {prev_v}:"
                for k, (x, y) in bch.items():
                    line += f"\n    behaviour {k}: {json.dumps(x)} -> {json.dumps(y)}"
                for f, cs in sorted(fch.items()):
                    line += f"\n    field {f}: {', '.join(cs)}"
        log(line)
        prev_v, prev_b, prev_fx = v, b, fx
    if write and not failed:
        write_outputs(results, changes)
    elif write:
        log(f"timeline: not writing {BEHAVIOURS_JSON}: {len(failed)} releases failed: {', '.join(failed)}")
    log(f"timeline: {len(results)} releases measured, {len(failed)} failed, {len(changes)} releases changed something")
    return 1 if failed else 0


def load_cached(root, v):
    """The probe dump a sweep left for release v: (behaviours, {case: fixture}) or None."""
    d = os.path.join(root, "fixtures", v)
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        if man["transformers_version"] != v:
            return None
        fixtures = {}
        for c in PROBES:
            with open(os.path.join(d, c + ".json")) as f:
                fixtures[c] = json.load(f)
    except (OSError, ValueError, KeyError):
        return None
    return man["behaviours"], fixtures


def assemble(releases, write):
    """Results and changes from the probe dumps earlier sweeps left in the cache (no installing)."""
    root = cache_root()
    results, changes, missing = {}, [], []
    prev = None
    for v in releases:
        got = load_cached(root, v)
        if got is None:
            missing.append(v)
            continue
        b, fx = got
        results[v] = b
        if prev is not None:
            pv, pb, pfx = prev
            bch = {k: (pb[k], b[k]) for k in b if pb.get(k) != b[k]}
            fch = fixture_changes(pfx, fx)
            if bch or fch:
                changes.append((v, pv, bch, fch))
                log(f"{pv} -> {v}: " + "; ".join([f"behaviour {k}: {x} -> {y}" for k, (x, y) in bch.items()] +
                                               [f"field {f}: {', '.join(cs)}" for f, cs in sorted(fch.items())]))
        prev = (v, b, fx)
    if missing:
        log(f"timeline: no cached probe dump for {', '.join(missing)}: run the sweep for them first")
    elif write:
        write_outputs(results, changes)
    log(f"timeline: {len(results)} releases assembled, {len(missing)} missing, {len(changes)} releases changed something")
    return 1 if missing else 0


def ranges(results):
    """[(first, last, behaviours)] of consecutive releases with equal behaviours."""
    out = []
    for v, b in results.items():
        if out and out[-1][2] == b:
            out[-1][1] = v
        else:
            out.append([v, v, b])
    return out


def write_outputs(results, changes, json_path=BEHAVIOURS_JSON, md_path=BEHAVIOURS_MD):
    with open(json_path, "w", encoding="ascii") as f:
        f.write(json.dumps(results, indent=1) + "\n")
    keys = list(next(iter(results.values())))
    L = ["# transformers behaviour timeline", "",
         "Written by `python3 golden/timeline.py --write` (or `--assemble --write` from the probe dumps cached by "
         "sweeps, or `--releases X --write`, which measures X alone and merges it; do not edit by hand): every "
         "transformers release from "
         f"{next(iter(results))} to {list(results)[-1]} ({len(results)} releases, the ones `pip index versions "
         "transformers` lists; it lists no 4.57.0), each installed and measured on torch 2.13.0 CPU. `behaviours.json` holds the same record per release; every fixture "
         "carries its release's record (`behaviours`), and `timeline.py --check-fixtures golden/fixtures` checks "
         "they agree.", "", "## Behaviours by release range", "",
         "| releases | " + " | ".join(f"`{k}`" for k in keys) + " |",
         "| --- | " + " | ".join("---" for _ in keys) + " |"]
    for first, last, b in ranges(results):
        r = first if first == last else f"{first} .. {last}"
        L.append(f"| {r} | " + " | ".join(f"`{json.dumps(b[k])}`" for k in keys) + " |")
    L += ["", "Releases: " + ", ".join(results) + ".", "", "## Definitions", ""]
    for k in keys:
        L.append(f"- **`{k}`**: {BEHAVIOUR_DOC.get(k, '(undocumented)')}")
    L += ["", "## What changed, release by release", "",
          f"Probe set ({len(PROBES)} cases of `cases/`): " + ", ".join(f"`{p}`" for p in PROBES) + ".",
          "A field is a fixture JSON pointer with list indices written `*`; version fields and "
          "`/steps/*/cache_position` (null where the release takes none) are not compared.", ""]
    if not changes:
        L.append("Nothing changed between consecutive releases.")
    for v, prev, bch, fch in changes:
        L.append(f"### {prev} -> {v}")
        L.append("")
        for k, (x, y) in bch.items():
            L.append(f"- behaviour `{k}`: `{json.dumps(x)}` -> `{json.dumps(y)}`")
        for f, cs in sorted(fch.items()):
            L.append(f"- field `{f}` ({len(cs)} probes): " + ", ".join(cs))
        L.append("")
    L.append("Releases not listed under a heading changed no behaviour and no probe field.")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write("\n".join(L) + "\n")
    log(f"timeline: wrote {json_path} and {md_path}")


# --------------------------------------------------------------------------------------------
# --releases X --write: one release measured and merged into the written timeline
# --------------------------------------------------------------------------------------------
CHANGE_HEAD = re.compile(r"### (\S+) -> (\S+)$")
CHANGE_BEHAVIOUR = re.compile(r"- behaviour `([^`]+)`: `(.*)` -> `(.*)`$")
CHANGE_FIELD = re.compile(r"- field `([^`]+)` \((\d+) probes?\): (.*)$")


def read_outputs(json_path=BEHAVIOURS_JSON, md_path=BEHAVIOURS_MD):
    """(results, changes) as write_outputs wrote them: the releases' records from behaviours.json and
    the changes between consecutive releases from behaviours.md's "What changed" section."""
    with open(json_path, encoding="ascii") as f:
        results = json.load(f)
    changes, cur = [], None
    with open(md_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index("## What changed, release by release")
    except ValueError:
        raise SystemExit(f"timeline: {md_path}: no '## What changed, release by release' section to merge into")
    for n, line in enumerate(lines[start + 1:], start + 2):
        m = CHANGE_HEAD.match(line)
        if m:
            cur = (m.group(2), m.group(1), {}, {})
            changes.append(cur)
            continue
        m = CHANGE_BEHAVIOUR.match(line)
        if m and cur:
            cur[2][m.group(1)] = (json.loads(m.group(2)), json.loads(m.group(3)))
            continue
        m = CHANGE_FIELD.match(line)
        if m and cur:
            cur[3][m.group(1)] = m.group(3).split(", ")
            if len(cur[3][m.group(1)]) != int(m.group(2)):
                raise SystemExit(f"timeline: {md_path}:{n}: {m.group(2)} probes announced, {len(cur[3][m.group(1)])} listed")
            continue
        if line.startswith("- ") and cur:
            raise SystemExit(f"timeline: {md_path}:{n}: not a change line this script writes: {line}")
    for v, prev, _, _ in changes:
        if v not in results or prev not in results:
            raise SystemExit(f"timeline: {md_path}: '### {prev} -> {v}' names a release {json_path} does not hold")
    return results, changes


def diff_records(prev, cur):
    """(behaviour changes, field changes) between two measured releases, each (behaviours, {case: fixture})."""
    (pb, pfx), (b, fx) = prev, cur
    return {k: (pb.get(k), b[k]) for k in b if pb.get(k) != b[k]}, fixture_changes(pfx, fx)


def merge(releases, measure, json_path=BEHAVIOURS_JSON, md_path=BEHAVIOURS_MD):
    """Measures each release (measure(v) -> (behaviours, {case: fixture}) or raises RuntimeError), and
    its neighbours in the written timeline, and writes the timeline with them in it: records added or
    replaced, the change between the neighbours replaced by the changes through the new release.
    Returns ([(release, previous, behaviour changes)], the releases whose behaviours changed)."""
    results, changes = read_outputs(json_path, md_path)
    by_release = {v: (p, bch, fch) for v, p, bch, fch in changes}
    measured = {}

    def get(v):
        if v not in measured:
            measured[v] = measure(v)
        return measured[v]

    changed = []
    for v in sorted(releases, key=vkey):
        order = sorted(set(results) | {v}, key=vkey)
        i = order.index(v)
        prev = order[i - 1] if i > 0 else None
        nxt = order[i + 1] if i + 1 < len(order) else None
        b, _ = get(v)
        results[v] = b
        by_release.pop(v, None)
        if nxt is not None:
            by_release.pop(nxt, None)
        for a, c in ((prev, v), (v, nxt)):
            if a is None or c is None:
                continue
            bch, fch = diff_records(get(a), get(c))
            if bch or fch:
                by_release[c] = (a, bch, fch)
            if c == v:
                changed.append((v, a, bch, fch))
    results = {v: results[v] for v in sorted(results, key=vkey)}
    ordered = [(v, *by_release[v]) for v in results if v in by_release]
    write_outputs(results, ordered, json_path, md_path)
    return changed


def measure_with(envs, v, fresh=()):
    """A release's probe dump: measured now for the releases being merged (fresh), from a sweep's cache
    for their neighbours where it has them."""
    cached = None if v in fresh else load_cached(envs.root, v)
    if cached is not None:
        return cached
    b, fx, err = dump_release(envs, v)
    if err:
        raise RuntimeError(f"{v}: {err}")
    return b, fx


def merge_main(releases):
    envs = Envs()
    try:
        changed = merge(releases, lambda v: measure_with(envs, v, set(releases)))
    except (RuntimeError, subprocess.CalledProcessError) as e:
        log(f"timeline: not writing {BEHAVIOURS_JSON}: {e}{chr(10) + e.output if getattr(e, 'output', None) else ''}")
        return 1
    rc = 0
    for v, prev, bch, fch in changed:
        if not bch and not fch:
            log(f"timeline: {v}: the behaviours and every probe field of {prev}")
            continue
        for k, (x, y) in bch.items():
            rc = 3
            log(f"timeline: {v}: behaviour {k}: {json.dumps(x)} -> {json.dumps(y)} since {prev}: the C++ reference "
                f"models behaviours by release (harness/src/core/behaviours.cpp; docs/architecture.md, 'To add a release X')")
        for f, cs in sorted(fch.items()):
            log(f"timeline: {v}: probe field {f} changed since {prev} in {', '.join(cs)}")
    return rc


# --------------------------------------------------------------------------------------------
# --check-fixtures
# --------------------------------------------------------------------------------------------
def check_fixtures(d):
    try:
        with open(BEHAVIOURS_JSON) as f:
            table = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{BEHAVIOURS_JSON}: /: cannot read: {e}")
        return 2
    if not os.path.isdir(d):
        print(f"{d}: /: not a directory")
        return 2
    passed = failed = 0
    for v in sorted(os.listdir(d)):
        sub = os.path.join(d, v)
        if not os.path.isdir(sub) or v.startswith("."):
            continue
        want = table.get(v)
        bad = []
        if want is None:
            bad.append(f"{sub}: /: release {v} is not in {os.path.relpath(BEHAVIOURS_JSON, ROOT)}")
        else:
            for n in sorted(os.listdir(sub)):
                if not n.endswith(".json"):
                    continue
                with open(os.path.join(sub, n)) as f:
                    fx = json.load(f)
                if fx.get("transformers_version") != v:
                    bad.append(f"{sub}/{n}: /transformers_version: {fx.get('transformers_version')!r}, folder says {v}")
                got = fx.get("behaviours")
                if got != want:
                    bad.append(f"{sub}/{n}: /behaviours: {json.dumps(got)} != behaviours.json {json.dumps(want)}")
        for b in bad:
            print(b)
        if bad:
            failed += 1
        else:
            passed += 1
    print(f"check-fixtures: {passed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="transformers behaviour timeline")
    ap.add_argument("--releases", nargs="+", help="only these releases (default: every release from 4.56.0 pip lists)")
    ap.add_argument("--write", action="store_true", help="write golden/behaviours.json and golden/behaviours.md")
    ap.add_argument("--assemble", action="store_true",
                    help="no installing: compare the probe dumps earlier (possibly parallel) sweeps cached")
    ap.add_argument("--check-fixtures", metavar="DIR", help="check DIR/<release>/*.json against golden/behaviours.json")
    args = ap.parse_args(argv)
    if args.check_fixtures:
        return check_fixtures(args.check_fixtures)
    releases = sorted(args.releases, key=vkey) if args.releases else list_releases()
    if args.write and args.releases and not args.assemble:
        return merge_main(releases)
    if args.write and args.releases:
        ap.error("--assemble --write needs every release (no --releases); --releases X --write merges X alone")
    if args.assemble:
        return assemble(releases, args.write)
    log(f"timeline: {len(releases)} releases: {' '.join(releases)}")
    return sweep(releases, args.write)


if __name__ == "__main__":
    sys.exit(main())
