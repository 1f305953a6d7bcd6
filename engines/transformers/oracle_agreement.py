#!/usr/bin/env python3
"""The model oracle (C++, kvc-model-oracle) against transformers' own no-cache float64 forward,
for every model of the engine zoo, of the family registry's set (make_models.py --set families) and
of the drawn set (--set drawn: two models per family drawn from its config space, seed 0), and every
pinned release whose environment exists.

    python3 engines/transformers/oracle_agreement.py [--oracle build/harness/kvc-model-oracle] [--models DIR]
                                                     [--family-models DIR] [--json] [--cache DIR | --no-cache]
                                                     [--oracle-args ARGS] [--only REGEX] [--exclude REGEX] [--release X ...]
                                                     [--all | --sample-seed N] [--decode-from K]

Two numbers per model and release: the max |logit difference| against transformers with its float32
islands patched to float64 (--exact: must be <= 1e-10, else exit 1), and against transformers as
shipped (its float32 islands: RMSNorm, rotary cos/sin, eager softmax; reported, not judged).
--decode-from K holds the oracle to transformers' cached forward instead: a prefill of K tokens, then one cached step
per token (a recurrent layer's decode form, lara_mini's recurrent delta rule beside its chunked prefill).
A release whose no-cache forward of a family has no window (UNWINDOWED_WITHOUT_CACHE: recurrent_gemma in 4.x) is
held to the oracle with every window widened past the sequence, and its row says so.
A release without the model's model_type is a row that says so (ABSENT), never a pass; a model that
fails to load or run in a release, or in the oracle, is that row's FAIL with the reason, and the run
goes on. Exit 77 (CTest's skip) when no release's environment exists.
Standard library only; each release runs in its own golden/.venv-<version>.

The families that engines/models/families.py lists in SAMPLED (the newest ones) enter a default run
as a seeded sample: one model per family, of its checkpoints and draws, picked by --sample-seed
(default 0; CI's ctest runs the default), so each new family adds one model per release to CI;
--all runs every model of theirs (the whole proof, a documented command: docs/families.md).

transformers' side is a pure function of the model's files, the token ids, the release's environment
(its venv folder is named by the sha256 of its pinned requirements), nocache_forward.py, exact64.py
and this script, so its logits are cached under the sha256 of all of them (--cache, default
~/.cache/kvconform/oracle-agreement; --no-cache recomputes); the oracle runs every time.
"""
import argparse
import glob
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUND = 1e-10
RUN_RELEASE = """
import json, os, sys, traceback
root, tokens, tmp, v, *models = sys.argv[1:]
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
import nocache_forward  # engines/transformers is on PYTHONPATH
tokens = [int(t) for t in tokens.split(",")]
status = {}
for mode in ("plain", "exact"):
    for m in models:
        name = os.path.basename(m)
        model_type = json.load(open(os.path.join(m, "config.json")))["model_type"]
        if model_type not in CONFIG_MAPPING:
            status[name] = {"absent": model_type}
            continue
        try:
            logits, _, _ = nocache_forward.run(m, tokens, exact=mode == "exact",
                                               decode_from=int(os.environ.get("KVC_DECODE_FROM") or 0))
            open(os.path.join(tmp, f"{v}.{name}.{mode}"), "wb").write(logits.contiguous().numpy().astype("<f8").tobytes())
        except Exception as e:
            status.setdefault(name, {})[mode] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
json.dump(status, open(os.path.join(tmp, f"{v}.status.json"), "w"))
"""


# Releases whose no-cache forward of a family masks nothing but the future on its local layers, the window living only
# in that release's cache: recurrent_gemma in 4.x (RecurrentGemmaModel._update_causal_mask; its attention keeps a ring
# of attention_window_size keys, which windows a cached decode). Their rows hold the oracle with every window widened
# past the sequence (--span-delta), and say so: the family's other rules are proven there, its window on the releases
# that window their no-cache forward. repro/recurrent_gemma_4x_no_window_without_cache.py shows the difference.
UNWINDOWED_WITHOUT_CACHE = {"recurrent_gemma": lambda release: release.startswith("4.")}


def read_f64(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack(f"<{len(data) // 8}d", data)


def content_key(release_venv, model_dir, tokens):
    """sha256 of everything transformers' logits for (release, model) depend on."""
    h = hashlib.sha256()
    for part in (RUN_RELEASE, os.path.basename(os.path.realpath(release_venv)), tokens):
        h.update(part.encode() + b"\0")
    for script in ("nocache_forward.py", "exact64.py"):  # the forward and its float64 patches
        with open(os.path.join(ROOT, "engines", "transformers", script), "rb") as f:
            h.update(f.read())
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path) and name.endswith((".json", ".safetensors")):  # what from_pretrained reads
            with open(path, "rb") as f:
                h.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:32]


def write_atomically(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run_release(py, v, models, tokens, tmp, cache, decode_from=0):
    """transformers' logits and status for each model into tmp/<v>.<model>.<mode>; from the cache
    where the key matches, the rest in one interpreter (then saved). Returns (status, cached count)."""
    status, todo, cached = {}, [], 0
    keyed = tokens + (f"/decode_from={decode_from}" if decode_from else "")
    keys = {m: content_key(os.path.dirname(os.path.dirname(py)), m, keyed) for m in models} if cache else {}
    for m in models:
        name = os.path.basename(m)
        entry = os.path.join(cache, keys[m]) if cache else None
        if entry and os.path.exists(entry + ".json"):
            with open(entry + ".json") as f:
                saved = json.load(f)
            if all(os.path.exists(f"{entry}.{mode}") for mode in saved["modes"]):
                for mode in saved["modes"]:
                    with open(f"{entry}.{mode}", "rb") as f, open(os.path.join(tmp, f"{v}.{name}.{mode}"), "wb") as g:
                        g.write(f.read())
                if saved["status"]:
                    status[name] = saved["status"]
                cached += 1
                continue
        todo.append(m)
    if todo:
        # One interpreter per release runs every model, plain first: --exact patches classes for good.
        subprocess.run([py, "-c", RUN_RELEASE, ROOT, tokens, tmp, v] + todo, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "engines", "transformers"),
                                KVC_DECODE_FROM=str(decode_from)))
        with open(os.path.join(tmp, f"{v}.status.json")) as f:
            fresh = json.load(f)
        status.update(fresh)
        if cache:
            os.makedirs(cache, exist_ok=True)
            for m in todo:
                name, entry = os.path.basename(m), os.path.join(cache, keys[m])
                modes = [mode for mode in ("plain", "exact") if os.path.exists(os.path.join(tmp, f"{v}.{name}.{mode}"))]
                for mode in modes:
                    with open(os.path.join(tmp, f"{v}.{name}.{mode}"), "rb") as f:
                        write_atomically(f"{entry}.{mode}", f.read())
                write_atomically(entry + ".json", json.dumps({"status": fresh.get(name, {}), "modes": modes}).encode())
    return status, cached


def write_set(which, out_dir, keep=lambda name: True):
    """The set's models that `keep` keeps, written into out_dir (only those: a sampled run writes no other)."""
    make = [sys.executable, os.path.join(ROOT, "engines/models/make_models.py")]
    names = [n for n in subprocess.run(make + ["--set", which, "--list"], check=True, capture_output=True,
                                       text=True).stdout.split() if keep(n)]
    if not names:
        return []
    subprocess.run(make + [out_dir, "--set", which] + [arg for n in names for arg in ("--only", n)],
                   check=True, stdout=subprocess.DEVNULL)
    return sorted(os.path.join(out_dir, n) for n in names)


def sample(models, seed):
    """(kept, left out): one model per family of families.SAMPLED, picked by the seed, and every other model."""
    sys.path.insert(0, os.path.join(ROOT, "engines", "models"))
    import families
    by_family, kept = {}, []
    for m in models:
        with open(os.path.join(m, "config.json")) as f:
            model_type = json.load(f).get("model_type")
        (by_family.setdefault(model_type, []) if model_type in families.SAMPLED else kept).append(m)
    left = []
    for model_type, ms in sorted(by_family.items()):
        ms = sorted(ms, key=os.path.basename)
        pick = int(hashlib.sha256(f"kvconform/agreement/{model_type}/{seed}".encode()).hexdigest(), 16) % len(ms)
        kept.append(ms[pick])
        left += [m for i, m in enumerate(ms) if i != pick]
    return kept, left


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default=os.path.join(ROOT, "build/harness/kvc-model-oracle"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build/engine-models"), help="the engine zoo's folder")
    ap.add_argument("--family-models", default=os.path.join(ROOT, "build/engine-models-families"),
                    help="the families set's folder (kept apart from the zoo: engine checks run every model of theirs)")
    ap.add_argument("--drawn-models", default=os.path.join(ROOT, "build/engine-models-drawn"), help="the drawn set's folder")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--decode-from", type=int, default=0,
                    help="transformers' side a cached prefill of this many tokens, then one cached step per token "
                         "(a recurrent layer's decode form); 0: one no-cache forward")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cache", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                    "kvconform", "oracle-agreement"),
                    help="where transformers' logits are kept, by content key")
    ap.add_argument("--no-cache", action="store_true", help="run transformers for every model, keep nothing")
    ap.add_argument("--oracle-args", default="", help="more arguments for kvc-model-oracle (the mutant ctest: '--span-delta 1')")
    ap.add_argument("--only", help="only the models whose folder name this regular expression finds (the MoE mutants' ctests)")
    ap.add_argument("--exclude", help="leave out the models whose folder name this regular expression finds (CI's "
                                      "whole-set ctest leaves the families it samples apart to their own ctest)")
    ap.add_argument("--release", action="append", default=[],
                    help="only this pinned release (repeatable; default: every golden/requirements-*.txt)")
    ap.add_argument("--all", action="store_true", help="every model of the sampled families too (the full proof)")
    ap.add_argument("--sample-seed", type=int, default=0, help="which model of each sampled family a default run checks")
    a = ap.parse_args()
    cache = None if a.no_cache else a.cache
    import re

    def keep(name):
        return (not a.only or re.search(a.only, name)) and not (a.exclude and re.search(a.exclude, name))
    models = (write_set("zoo", a.models, keep) + write_set("families", a.family_models, keep)
              + write_set("drawn", a.drawn_models, keep))
    if a.only and not models:
        ap.error(f"--only {a.only}: matches no model")
    left_out = []
    if not a.all:
        models, left_out = sample(models, a.sample_seed)
    tokens = ",".join(str(1 + (37 * i + 11) % 255) for i in range(a.tokens))
    releases = sorted(p.split("requirements-")[1][:-4] for p in glob.glob(os.path.join(ROOT, "golden/requirements-*.txt")))
    for v in a.release:
        if v not in releases:
            ap.error(f"--release {v}: no golden/requirements-{v}.txt (pinned: {', '.join(releases)})")
    releases = [v for v in releases if not a.release or v in a.release]
    rows, failed, checked, passed = [], 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        status, cached, runs = {}, 0, 0
        for v in releases:
            py = os.path.join(ROOT, f"golden/.venv-{v}/bin/python")
            if os.path.exists(py):
                status[v], n = run_release(py, v, models, tokens, tmp, cache, a.decode_from)
                cached, runs = cached + n, runs + len(models)
        for mdir in models:
            model = os.path.basename(mdir)
            r = subprocess.run([a.oracle, mdir, tokens, os.path.join(tmp, "oracle")] + a.oracle_args.split(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            ours = read_f64(os.path.join(tmp, "oracle")) if r.returncode == 0 else None
            with open(os.path.join(mdir, "config.json")) as f:
                unwindowed = UNWINDOWED_WITHOUT_CACHE.get(json.load(f).get("model_type"))
            ours_unwindowed, r_unwindowed = None, None
            if unwindowed and any(unwindowed(v) for v in releases):
                r_unwindowed = subprocess.run([a.oracle, mdir, tokens, os.path.join(tmp, "oracle")] + a.oracle_args.split()
                                              + ["--span-delta", str(a.tokens)], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True)
                ours_unwindowed = read_f64(os.path.join(tmp, "oracle")) if r_unwindowed.returncode == 0 else None
            for v in releases:
                row = {"model": model, "release": v}
                if unwindowed and unwindowed(v):
                    row["unwindowed"] = True
                rows.append(row)
                if v not in status:
                    row["skipped"] = "no golden/.venv-" + v
                    continue
                st = status[v].get(model, {})
                if "absent" in st:
                    row["absent"] = f"transformers {v} has no model_type {st['absent']}"
                    continue
                checked += 1
                mine, run = (ours_unwindowed, r_unwindowed) if row.get("unwindowed") else (ours, r)
                if mine is None:
                    row["fail"] = "kvc-model-oracle: " + (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
                elif "exact" in st:
                    row["fail"] = "transformers --exact: " + st["exact"]
                if "fail" in row:
                    failed += 1
                    continue
                diffs = {}
                for mode in ("exact", "plain"):
                    path = os.path.join(tmp, f"{v}.{model}.{mode}")
                    theirs = read_f64(path) if os.path.exists(path) else None
                    if theirs is not None and len(theirs) != len(mine):
                        theirs = None
                    diffs[mode] = max(abs(x - y) for x, y in zip(mine, theirs)) if theirs is not None else None
                row.update(exact=diffs["exact"], plain=diffs["plain"], ok=diffs["exact"] is not None and diffs["exact"] <= BOUND)
                if row["ok"]:
                    passed += 1
                else:
                    failed += 1
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'model':22} {'release':8} {'vs exact float64':>17} {'vs as shipped':>14}")
        for r in rows:
            if "skipped" in r:
                print(f"{r['model']:22} {r['release']:8} SKIP {r['skipped']}")
            elif "absent" in r:
                print(f"{r['model']:22} {r['release']:8} ABSENT {r['absent']}")
            elif "fail" in r:
                print(f"{r['model']:22} {r['release']:8} FAIL {r['fail']}")
            else:
                plain = f"{r['plain']:14.3e}" if r["plain"] is not None else f"{'n/a':>14}"
                note = "  (no window: this release's no-cache forward has none)" if r.get("unwindowed") else ""
                print(f"{r['model']:22} {r['release']:8} {r['exact']:17.3e} {plain}{'' if r['ok'] else '  > 1e-10: FAIL'}{note}")
        absent = sum(1 for r in rows if "absent" in r)
        print(f"{passed} passed, {failed} failed, {absent} absent (a release without the family)")
        if left_out:
            print(f"{len(left_out)} models of the sampled families (families.SAMPLED) left out at --sample-seed "
                  f"{a.sample_seed}: --all checks them too")
        if runs:
            print(f"transformers' side: {runs - cached} of {runs} (release, model) forwards run, {cached} from the cache "
                  f"({cache}, keyed by the sha256 of the model files, tokens, environment and forward script)")
    if not checked:
        print("no pinned transformers environment (bash golden/setup_env.sh VERSION): nothing checked", file=sys.stderr)
        return 77
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
