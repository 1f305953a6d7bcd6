#!/usr/bin/env python3
"""Drives an engine worker (engines/mlx/adapter.py by default) over the engine protocol through
hand-written plans on the tiny zoo, and compares every extend's logits with transformers' float64
no-cache forward (engines/transformers/nocache_forward.py). Run it with a golden venv's python:

    MLXPY=$(engines/setup_env.sh mlx)
    PYTHONPATH=python golden/.venv-5.24.0/bin/python engines/mlx/drive.py ZOO_DIR [--worker "$MLXPY engines/mlx/adapter.py"]
        [--only MODEL] [--plans a,b] [--mutants] [--exact] [--json OUT] [--show-steps]

Per model and plan, one line: the max abs logit error over all extends, the first step where it
exceeds --tol (1e-3 by default), or SKIP/ERROR with the worker's message. With --mutants, also the
mutants (window+1, window-1, full) on the plans in MUTANT_PLANS: their error must be large.
"""
import argparse
import json
import os
import shlex
import sys

import numpy as np

from kvconform.protocol import Client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "engines", "transformers"))


def toks(n, salt):
    """n deterministic token ids in 3..255 (no special tokens)."""
    out, x = [], (salt * 2654435761 + 12345) & 0xFFFFFFFF
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(3 + (x >> 8) % 253)
    return out


def E(n, seq=0, salt=None):
    return ("extend", seq, n, salt)


def plans(W):
    """name -> (options, steps). Steps: ("extend", seq, n, salt) | ("rollback", seq, n) | ("reload", seq) | ("reset",)."""
    dec = lambda k, seq=0: [E(1, seq) for _ in range(k)]  # noqa: E731
    p = {
        "min_one_token": ({}, [E(1)]),
        "min_window": ({}, [E(W)]),
        "min_window+1": ({}, [E(W + 1)]),
        "prefill_lt_window": ({}, [E(W - 1)] + dec(2 * W + 1)),
        "prefill_eq_window": ({}, [E(W)] + dec(2 * W + 1)),
        "prefill_gt_window": ({}, [E(3 * W + 1)] + dec(2 * W + 1)),
        "decode_only": ({}, dec(3 * W + 2)),
        "multi_after_full": ({}, [E(W + 2), E(3), E(2 * W), E(1), E(W - 1), E(W), E(W + 1), E(2), E(1), E(2 * W + 3)]),
        "multi_after_decode": ({}, [E(2)] + dec(2 * W) + [E(2), E(W), E(W + 1)] + dec(2) + [E(3)]),
        "long_620": ({}, [E(306)] + [E(1 + i % 7) for i in range(80)]),
        "rollback_in_window": ({}, [E(W - 2 if W > 2 else 1), ("rollback", 0, 1), E(2), ("rollback", 0, 2), E(1)] + dec(2 * W) + [E(3)]),
        "rollback_after_window": ({}, [E(2 * W), ("rollback", 0, 2), E(3)] + dec(W)),
        "reload": ({}, [E(W + 3), ("reload", 0)] + dec(W) + [E(3), ("reload", 0), E(2)] + dec(2) + [("reload", 0), E(W + 1)]),
        "reload_in_window": ({}, [E(W - 1), ("reload", 0)] + dec(W + 1) + [("reload", 0), E(2)]),
        "reload_empty": ({}, [("reload", 0), E(W + 1)]),
        "two_sequences": ({}, [E(W - 1, 0), E(2 * W, 1), E(1, 0), E(1, 1), E(W + 1, 0), E(1, 1), E(1, 0), E(3, 1)]
                          + dec(W, 0) + dec(W, 1) + [E(2, 0), E(2, 1)]),
        "reset": ({}, [E(2 * W), ("reset",), E(W + 1)] + dec(W)),
        "prefill_step_2": ({"prefill_step": 2}, [E(3 * W + 1)] + dec(W) + [E(2 * W + 1)]),
        "prefill_step_w": ({"prefill_step": W}, [E(4 * W + 3)] + dec(W) + [E(3 * W)]),
        "prefill_step_w+1": ({"prefill_step": W + 1}, [E(4 * W + 3)] + dec(W) + [E(3 * W)]),
    }
    return p


MUTANT_PLANS = ("prefill_gt_window", "multi_after_full", "decode_only")


class Worker:
    """The worker over kvconform.protocol's Client: replies as (header, {name: bytes})."""

    def __init__(self, cmd):
        self.client = Client(cmd)

    def call(self, header):
        h, bufs = self.client.request(header, check=False)
        return h, {name: data for name, (_, _, data) in bufs.items()}

    def close(self):
        self.client.close()


class Reference:
    """float64 no-cache logits of a token history, reusing a longer history's forward for a prefix."""

    def __init__(self, model_dir, exact):
        import nocache_forward
        self.nf = nocache_forward
        self.model, _ = nocache_forward.load_float64(model_dir, exact)
        self.done = []  # (tokens tuple, logits ndarray)

    def prepare(self, histories):
        """Computes the forwards of the histories that are not a prefix of another one, longest first."""
        for h in sorted({tuple(h) for h in histories}, key=len, reverse=True):
            if not any(len(t) >= len(h) and t[:len(h)] == h for t, _ in self.done):
                self.done.append((h, self.nf.forward(self.model, list(h)).numpy()))

    def rows(self, history, start, end):
        h = tuple(history)
        for t, lg in self.done:
            if len(t) >= len(h) and t[:len(h)] == h:
                return lg[start:end]
        lg = self.nf.forward(self.model, list(h)).numpy()
        self.done.append((h, lg))
        return lg[start:end]


def expand(steps, sequences_salt=0):
    """Fills in token ids: each extend gets fresh deterministic tokens."""
    out, k = [], 0
    for s in steps:
        if s[0] == "extend":
            k += 1
            out.append(("extend", s[1], toks(s[2], (s[3] if s[3] is not None else 0) + 1000 * k + 7 * s[1])))
        else:
            out.append(s)
    return out


def fuzz_plan(W, rng, length=24):
    """A random plan: extends of sizes around the window, rollbacks, reloads, resets, two sequences."""
    sizes = [1, 1, 1, 2, 3, W - 1, W, W + 1, 2 * W, 2 * W + 1]
    steps = []
    for _ in range(length):
        r, seq = rng.random(), int(rng.random() < 0.3)
        if r < 0.6:
            steps.append(E(max(1, sizes[int(rng.integers(len(sizes)))]), seq))
        elif r < 0.8:
            steps.append(("rollback", seq, int(rng.integers(1, 4))))
        elif r < 0.95:
            steps.append(("reload", seq))
        else:
            steps.append(("reset",))
    step = [None, 1, 2, W, W + 1][int(rng.integers(5))]
    return ({} if step is None else {"prefill_step": step}), steps


def legal(steps):
    """Drops rollbacks longer than the sequence at that point."""
    out, n = [], {}
    for s in steps:
        if s[0] == "extend":
            n[s[1]] = n.get(s[1], 0) + s[2]
        elif s[0] == "rollback":
            if n.get(s[1], 0) < s[2]:
                continue
            n[s[1]] -= s[2]
        elif s[0] == "reset":
            n = {}
        out.append(s)
    return out


def run_plan(worker, ref, model_dir, name, options, steps, mutant, tol, show, skip_refused=False):
    steps = expand(steps)
    hist = {}
    max_tokens, cur = 0, {}
    for s in steps:  # sizes
        if s[0] == "extend":
            cur[s[1]] = cur.get(s[1], 0) + len(s[2])
        elif s[0] == "rollback":
            cur[s[1]] -= s[2]
        elif s[0] == "reset":
            cur = {}
        max_tokens = max([max_tokens] + list(cur.values()))
    nseq = 1 + max(s[1] for s in steps if len(s) > 1)
    sim, hs = {}, []
    for s in steps:  # the histories the plan reaches if the engine refuses nothing
        if s[0] == "extend":
            sim.setdefault(s[1], []).extend(s[2])
            hs.append(list(sim[s[1]]))
        elif s[0] == "rollback":
            del sim.setdefault(s[1], [])[len(sim[s[1]]) - s[2]:]
        elif s[0] == "reset":
            sim = {}
    ref.prepare(hs)
    h, _ = worker.call({"op": "load", "case": name, "model": model_dir, "options": options, "mutant": mutant,
                        "max_tokens": max_tokens, "sequences": nseq})
    if h["status"] != "ok":
        return {"status": h["status"].upper(), "error": h.get("error"), "step": "load"}
    vocab = h["vocab"]
    worst, first_bad, per_step = 0.0, None, []
    for i, s in enumerate(steps):
        hdr = {"op": s[0], "case": name, "step": i}
        if s[0] == "extend":
            hdr.update(seq=s[1], tokens=s[2])
        elif s[0] == "rollback":
            hdr.update(seq=s[1], n=s[2])
        elif s[0] == "reload":
            hdr.update(seq=s[1])
        r, bufs = worker.call(hdr)
        if skip_refused and s[0] == "rollback" and r["status"] == "unsupported":
            continue  # the engine refused; its state is unchanged
        if r["status"] != "ok":
            return {"status": r["status"].upper(), "error": r.get("error"), "step": i, "op": s[0],
                    "max_err": worst, "first_bad": first_bad}
        if s[0] == "extend":
            seqh = hist.setdefault(s[1], [])
            start = len(seqh)
            seqh.extend(s[2])
            got = np.frombuffer(bufs["logits"], dtype="<f4").reshape(len(s[2]), vocab).astype(np.float64)
            want = ref.rows(seqh, start, len(seqh))
            err = np.abs(got - want).max(axis=1)
            e = float(err.max())
            per_step.append((i, s[1], start, len(s[2]), e))
            if show:
                print(f"    step {i:3d} seq {s[1]} pos {start}..{len(seqh) - 1}: max err {e:.3g}"
                      + ("" if e <= tol else "  <-- positions " + ",".join(str(start + j) for j in np.nonzero(err > tol)[0][:12])),
                      file=sys.stderr)
            if e > tol and first_bad is None:
                j = int(np.nonzero(err > tol)[0][0])
                first_bad = {"step": i, "seq": s[1], "position": start + j, "extend_len": len(s[2]), "err": float(err[j])}
            worst = max(worst, e)
        elif s[0] == "rollback":
            del hist.setdefault(s[1], [])[len(hist[s[1]]) - s[2]:]
        elif s[0] == "reset":
            hist = {}
    return {"status": "OK" if first_bad is None else "WRONG", "max_err": worst, "first_bad": first_bad,
            "max_tokens": max_tokens}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("zoo")
    ap.add_argument("--worker", default=None, help="worker command (default: $MLXPY engines/mlx/adapter.py)")
    ap.add_argument("--only", action="append")
    ap.add_argument("--plans", default=None, help="comma-separated plan names")
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("--no-plans", action="store_true", help="only the mutants")
    ap.add_argument("--exact", action="store_true", help="reference with exact64's float64 patches")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--fuzz", type=int, default=0, help="also run this many random plans per model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show-steps", action="store_true")
    a = ap.parse_args()
    cmd = shlex.split(a.worker) if a.worker else [os.environ.get("MLXPY", "python3"), os.path.join(HERE, "adapter.py")]
    worker = Worker(cmd)
    hello, _ = worker.call({"op": "hello", "protocol": 1, "level": "engine"})
    print(f"# {hello['name']} {hello['version']} operations={hello['operations']}", flush=True)
    results = []
    for model in a.only or sorted(m for m in os.listdir(a.zoo) if os.path.isfile(os.path.join(a.zoo, m, "config.json"))):
        mdir = os.path.abspath(os.path.join(a.zoo, model))
        with open(os.path.join(mdir, "config.json")) as f:
            W = json.load(f)["sliding_window"]
        ref = Reference(mdir, a.exact)
        P = plans(W)
        names = a.plans.split(",") if a.plans else list(P)
        runs = [] if a.no_plans else [(n, "none") for n in names]
        if a.mutants:
            runs += [(n, m) for m in ("window+1", "window-1", "full") for n in MUTANT_PLANS]
        rng = np.random.default_rng(a.seed)
        for k in range(a.fuzz):
            P[f"fuzz{a.seed}_{k}"] = fuzz_plan(W, rng)
            P[f"fuzz{a.seed}_{k}"] = (P[f"fuzz{a.seed}_{k}"][0], legal(P[f"fuzz{a.seed}_{k}"][1]))
            runs.append((f"fuzz{a.seed}_{k}", "none"))
        for pname, mutant in runs:
            opts, steps = P[pname]
            r = run_plan(worker, ref, mdir, pname, opts, steps, mutant, a.tol, a.show_steps,
                         skip_refused=pname.startswith("fuzz"))
            if r.get("status") == "WRONG" and pname.startswith("fuzz"):
                r["plan_steps"] = [list(x) for x in steps]
                r["options"] = opts
            r.update(model=model, plan=pname, mutant=mutant)
            results.append(r)
            tag = pname if mutant == "none" else f"{pname} [{mutant}]"
            extra = ""
            if r.get("first_bad"):
                fb = r["first_bad"]
                extra = f" first >tol at step {fb['step']} pos {fb['position']} (extend of {fb['extend_len']})"
            if r.get("error"):
                extra += f" at step {r['step']}: {r['error']}"
            me = r.get("max_err")
            print(f"{model:20s} {tag:34s} {r['status']:11s} max_err={'-' if me is None else f'{me:.3g}'}{extra}", flush=True)
    worker.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"engine": hello, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
