#!/usr/bin/env python3
"""A small driver for engine workers (docs/engines.md): runs plans, compares each new position's
logits with transformers' float64 no-cache forward, prints the max abs error per configuration.

    PYTHONPATH=python python3 engines/llama_cpp/drive.py --worker build-llama/kvc_llama_worker --zoo /tmp/kvc-zoo \
        [--ref-python golden/.venv-5.24.0/bin/python] [--only NAME] [--json OUT]

Not the harness (which judges against its own float64 oracle): a quick, self-contained check for
an adapter author. Needs numpy (any python; the references run under --ref-python).
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

from kvconform.protocol import Client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


class Worker:
    """The worker over kvconform.protocol's Client; its stderr to $DRIVE_STDERR (default: dropped)."""

    def __init__(self, argv, env=None):
        self.argv = argv
        self.client = Client(argv, env=env, stderr=open(os.environ.get("DRIVE_STDERR", os.devnull), "ab"))

    def call(self, h):
        r, bufs = self.client.request(h, check=False)
        return r, [np.frombuffer(data, dtype=np.float32).reshape(shape) for _, shape, data in bufs.values()]

    def close(self):
        try:
            self.client.close()
        except Exception:
            self.client.process.kill()


class Reference:
    """float64 no-cache logits of a token list, cached on disk by content."""

    def __init__(self, python, cache_dir):
        self.python, self.cache_dir = python, cache_dir
        os.makedirs(cache_dir, exist_ok=True)

    def __call__(self, model_dir, tokens):
        key = hashlib.sha256((os.path.abspath(model_dir) + ":" + ",".join(map(str, tokens))).encode()).hexdigest()[:24]
        path = os.path.join(self.cache_dir, key + ".f64")
        if not os.path.exists(path):
            subprocess.run([self.python, os.path.join(ROOT, "engines/transformers/nocache_forward.py"), model_dir,
                            "--tokens", ",".join(map(str, tokens)), "--out", path + ".tmp"],
                           check=True, stdout=subprocess.DEVNULL)
            os.replace(path + ".tmp", path)
        return np.fromfile(path, dtype=np.float64).reshape(len(tokens), -1)


def run_plan(worker, model_dir, plan, options, mutant, ref, sequences=1):
    """plan: list of ("extend", seq, tokens) / ("rollback", seq, n) / ("reload", seq).
    Returns dict with max abs error, first bad position, or the refusal."""
    max_tokens = 0
    lens = [0] * sequences
    for step in plan:
        if step[0] == "extend":
            lens[step[1]] += len(step[2])
        elif step[0] == "rollback":
            lens[step[1]] -= step[2]
        max_tokens = max(max_tokens, max(lens))
    r, _ = worker.call({"op": "load", "case": "drive", "model": os.path.abspath(model_dir), "options": options,
                        "mutant": mutant, "max_tokens": max_tokens, "sequences": sequences})
    if r["status"] != "ok":
        return {"status": r["status"], "error": r.get("error"), "step": "load"}
    hist = [[] for _ in range(sequences)]
    records = []  # (seq, token list after the extend, start, logits)
    branches = []  # every token list a sequence had before a rollback, plus the final ones
    for i, step in enumerate(plan):
        if step[0] == "extend":
            _, seq, toks = step
            r, bufs = worker.call({"op": "extend", "case": "drive", "step": i, "seq": seq, "tokens": toks})
            if r["status"] != "ok":
                return {"status": r["status"], "error": r.get("error"), "step": i}
            start = len(hist[seq])
            hist[seq] = hist[seq] + list(toks)
            records.append((seq, tuple(hist[seq]), start, bufs[0]))
        elif step[0] == "rollback":
            _, seq, n = step
            branches.append(tuple(hist[seq]))
            r, _ = worker.call({"op": "rollback", "case": "drive", "step": i, "seq": seq, "n": n})
            if r["status"] != "ok":
                return {"status": r["status"], "error": r.get("error"), "step": i}
            hist[seq] = hist[seq][:len(hist[seq]) - n]
        elif step[0] == "reload":
            r, _ = worker.call({"op": "reload", "case": "drive", "step": i, "seq": step[1]})
            if r["status"] != "ok":
                return {"status": r["status"], "error": r.get("error"), "step": i}
        elif step[0] == "reset":
            r, _ = worker.call({"op": "reset", "case": "drive", "step": i})
            if r["status"] != "ok":
                return {"status": r["status"], "error": r.get("error"), "step": i}
            branches.extend(tuple(h) for h in hist)
            hist = [[] for _ in range(sequences)]
    branches.extend(tuple(h) for h in hist)
    # keep only maximal branches
    branches = [b for b in set(branches) if b and not any(len(c) > len(b) and c[:len(b)] == b for c in branches)]
    refs = {b: ref(model_dir, list(b)) for b in branches}
    worst, first_bad, first_big, per_pos = 0.0, None, None, []
    for seq, toks, start, logits in records:
        b = next(b for b in branches if b[:len(toks)] == toks)
        want = refs[b][start:len(toks)]
        err = np.abs(logits.astype(np.float64) - want).max(axis=1)
        for k, e in enumerate(err):
            per_pos.append((seq, start + k, float(e)))
            if e > 1e-3 and first_bad is None:
                first_bad = (seq, start + k, float(e))
            if e > 0.1 and first_big is None:
                first_big = (seq, start + k, float(e))
        worst = max(worst, float(err.max()))
    return {"status": "ok", "max_abs": worst, "first_over_1e-3": first_bad, "first_over_0.1": first_big,
            "positions": len(per_pos)}


def toks(rng, n):
    return [rng.randrange(256) for _ in range(n)]


def main_plan(seed=1):
    """prefill 7, decode 1 x5, extend 5, then 700 single tokens."""
    rng = random.Random(seed)
    plan = [("extend", 0, toks(rng, 7))]
    plan += [("extend", 0, toks(rng, 1)) for _ in range(5)]
    plan += [("extend", 0, toks(rng, 5))]
    plan += [("extend", 0, toks(rng, 1)) for _ in range(700)]
    return plan


def rollback_plan(n_back=5, seed=2, reload=False, rollback=True):
    """300+ tokens (> 256 past the window), then rollback n_back (or reload), then 60 more."""
    rng = random.Random(seed)
    plan = [("extend", 0, toks(rng, 7))] + [("extend", 0, toks(rng, 1)) for _ in range(310)]
    if rollback:
        plan.append(("rollback", 0, n_back))
    if reload:
        plan.append(("reload", 0))
    plan += [("extend", 0, toks(rng, 1)) for _ in range(60)]
    return plan


def rollback_chunk_plan(n_back, seed=3):
    """like rollback_plan, but the rolled-back tokens arrive as one chunk (an extend of n_back+3)."""
    rng = random.Random(seed)
    plan = [("extend", 0, toks(rng, 7))] + [("extend", 0, toks(rng, 1)) for _ in range(300)]
    plan += [("extend", 0, toks(rng, n_back + 3)), ("rollback", 0, n_back)]
    plan += [("extend", 0, toks(rng, 1)) for _ in range(40)]
    return plan


def two_seq_plan(seed=4):
    rng = random.Random(seed)
    plan = [("extend", 0, toks(rng, 7)), ("extend", 1, toks(rng, 5))]
    for i in range(300):
        plan.append(("extend", i % 2, toks(rng, 1 if i % 7 else 3)))
    plan += [("rollback", 1, 3), ("reload", 0)]
    for i in range(40):
        plan.append(("extend", (i + 1) % 2, toks(rng, 1)))
    return plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=os.path.join(ROOT, "build-llama", "kvc_llama_worker"))
    ap.add_argument("--worker-arg", action="append", default=[])
    ap.add_argument("--zoo", default="/tmp/kvc-zoo")
    ap.add_argument("--ref-python", default=os.path.join(ROOT, "golden", ".venv-5.24.0", "bin", "python"))
    ap.add_argument("--ref-cache", default=os.path.join(tempfile.gettempdir(), "kvc-drive-ref"))
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--matrix", default="full", choices=["full", "rollback", "convert", "findings"],
                    help="full: the configuration matrix; rollback: long rollbacks; convert: no extra cases "
                         "(pair with --worker-arg=--convert=... to check a converter variant)")
    a = ap.parse_args()
    ref = Reference(a.ref_python, a.ref_cache)
    w = Worker([a.worker] + a.worker_arg)
    hello, _ = w.call({"op": "hello", "protocol": 1, "level": "engine"})
    print(json.dumps(hello), flush=True)
    results = []

    def case(name, model, plan, options=None, mutant="none", sequences=1):
        if a.only and a.only not in name:
            return
        t = time.time()
        res = run_plan(w, os.path.join(a.zoo, model), plan, options or {}, mutant, ref, sequences)
        res.update(name=name, model=model, options=options or {}, mutant=mutant, seconds=round(time.time() - t, 1))
        results.append(res)
        if res["status"] == "ok":
            big = res["first_over_0.1"]
            big = f"(seq {big[0]}, pos {big[1]}, {big[2]:.3g})" if big else "-"
            print(f"{name:58s} max_abs {res['max_abs']:.3e}  first>0.1 {big}", flush=True)
        else:
            print(f"{name:58s} {res['status'].upper()} at step {res['step']}: {res['error']}", flush=True)

    g2 = "gemma2-w4"
    if a.matrix == "rollback":
        for ub in (3, 64, 512):
            for swa_full in (False, True):
                for n_back in (200, 250, 256, 260, 300):
                    case(f"rollback{n_back} {g2} ub={ub} swa_full={int(swa_full)}", g2, rollback_plan(n_back),
                         {"swa_full": swa_full, "n_ubatch": ub})
        w.close()
        return
    if a.matrix == "findings":
        # the minimal plans of engines/llama_cpp/README.md, "Findings"
        rng = random.Random(7)
        long_, nxt = toks(rng, 260), toks(rng, 1)
        for n_back in (253, 255):
            for swa_full in (False, True):
                case(f"extend 260, rollback {n_back}, extend 1, ub=1 swa_full={int(swa_full)}", g2,
                     [("extend", 0, long_), ("rollback", 0, n_back), ("extend", 0, nxt)],
                     {"n_ubatch": 1, "swa_full": swa_full})
        case("extend 260, rollback 255, rollback_check", g2,
             [("extend", 0, long_), ("rollback", 0, 255), ("extend", 0, nxt)],
             {"n_ubatch": 1, "swa_full": False, "rollback_check": True})
        two = [("extend", 0, [3, 1])]
        for o in ({"type_k": "q8_0", "type_v": "f16", "flash_attn": False},
                  {"type_k": "f16", "type_v": "f16", "flash_attn": False},
                  {"type_k": "q8_0", "type_v": "q8_0", "flash_attn": False},
                  {"type_k": "q8_0", "type_v": "q8_0", "flash_attn": True}):
            case(f"extend 2, {o}", g2, two, o)
        w.close()
        return
    if a.matrix == "convert":
        for m in ("gemma2-w4", "gemma3-w3", "gemma3-irregular-w4", "mistral-w5"):
            case(f"main {m} ub=3", m, main_plan(), {"n_ubatch": 3})
        w.close()
        return
    for ub in (1, 3, 512):
        for swa_full in (False, True):
            for fa in (False, True):
                for t in ("f32", "f16"):
                    o = {"n_ubatch": ub, "swa_full": swa_full, "flash_attn": fa, "type_k": t, "type_v": t}
                    case(f"main {g2} ub={ub} swa_full={int(swa_full)} fa={int(fa)} kv={t}", g2, main_plan(), o)
    for mut in ("window+1", "window-1", "full"):
        case(f"main {g2} mutant={mut}", g2, main_plan(), {"n_ubatch": 3}, mut)
    for swa_full in (False, True):
        for n_back in (1, 5, 30):
            case(f"rollback{n_back} {g2} swa_full={int(swa_full)}", g2, rollback_plan(n_back), {"swa_full": swa_full})
        case(f"rollback-chunk8 {g2} swa_full={int(swa_full)}", g2, rollback_chunk_plan(8), {"swa_full": swa_full})
        case(f"reload {g2} swa_full={int(swa_full)}", g2, rollback_plan(reload=True, rollback=False), {"swa_full": swa_full})
        case(f"rollback5+reload {g2} swa_full={int(swa_full)}", g2, rollback_plan(5, reload=True), {"swa_full": swa_full})
        for unified in (False, True):
            case(f"two-seq {g2} swa_full={int(swa_full)} kv_unified={int(unified)}", g2, two_seq_plan(),
                 {"swa_full": swa_full, "kv_unified": unified, "n_ubatch": 3}, sequences=2)
    for m in ("gemma3-w3", "gemma3-irregular-w4", "mistral-w5"):
        case(f"main {m} ub=3", m, main_plan(), {"n_ubatch": 3})
        case(f"rollback5 {m}", m, rollback_plan(5), {})
        for mut in ("window+1", "window-1", "full"):
            case(f"main {m} mutant={mut}", m, main_plan(), {"n_ubatch": 3}, mut)
    case("unknown option", g2, main_plan()[:1], {"cache": "static"})
    w.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
