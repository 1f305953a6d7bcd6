#!/usr/bin/env python3
"""Self-check of the transformers adapter, in-process (no harness, no pytest).

    python3 engines/models/make_models.py /tmp/kvc-models
    PYTHONPATH=python golden/.venv-5.24.0/bin/python engines/transformers/selfcheck.py /tmp/kvc-models \
        [--models gemma2-w4,...] [--caches dynamic,static,hybrid] [--attentions eager,sdpa,flex]
        [--paddings 0,3] [--plans base,reload,rollback,rollback-early] [--mutants] [--record-past]
        [--unchecked-crop]

For every model x cache x attention x left_padding x plan it runs adapter.TransformersEngine through
the plan (extends, reloads, rollbacks) and compares each extend's logits with the plain float64
no-cache forward of the sequence so far (nocache_forward.py without --exact), atol 1e-4. One JSON
line per run: status "pass" | "fail" (max error above atol; the first failing step) | "unsupported"
(the adapter's SKIP message) | "error" (its FAIL message), then a summary table on stderr.
--mutants adds, per model, the adapter mutants (window_off_by_one+1, window_off_by_one-1, full) on dynamic/eager, which
must "fail" (the suite catches them). Exit status 0 always: the lines are the findings.
"""
import argparse
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import transformers

from adapter import TransformersEngine  # siblings: the script's folder is on sys.path
from kvconform import Unsupported
from nocache_forward import forward, load_float64

ATOL = 1e-4
BASE = [("extend", 7), ("extend", 1), ("extend", 1), ("extend", 5)] + [("extend", 1)] * 30
PLANS = {
    "base": BASE,
    "reload": BASE[:4] + [("reload",)] + BASE[4:20] + [("reload",)] + BASE[20:],
    # a rollback after every window is full (sliding layers have dropped states)
    "rollback": BASE[:4] + [("rollback", 3)] + [("extend", 1)] * 6 + [("rollback", 2), ("extend", 3)] + [("extend", 1)] * 4,
    # a rollback before any window is full
    "rollback-early": [("extend", 2), ("rollback", 1), ("extend", 1), ("extend", 3)] + [("extend", 1)] * 8,
}


def step_tokens(step, n):
    return [(37 * step + 11 * i + 5) % 250 + 3 for i in range(n)]


class Reference:
    def __init__(self, model_dir):
        self.model = load_float64(model_dir, False)[0]
        self.memo = {}

    def logits(self, history):
        key = tuple(history)
        if key not in self.memo:
            self.memo[key] = forward(self.model, list(history)).numpy()
        return self.memo[key]


def run(model_dir, ref, options, plan, mutant="none"):
    eng = TransformersEngine()
    r = {"status": "pass", "max_err": 0.0}
    t0 = time.time()
    try:
        vocab = eng.load(model_dir, options, mutant, sum(s[1] for s in plan if s[0] == "extend"), 1)
        history = []
        for k, s in enumerate(plan):
            if s[0] == "extend":
                toks = step_tokens(k, s[1])
                got = np.frombuffer(eng.extend(0, toks), dtype="<f4").reshape(len(toks), vocab)
                history += toks
                want = ref.logits(history)[-len(toks):]
                err = float(np.abs(got.astype(np.float64) - want).max())
                r["max_err"] = max(r["max_err"], err)
                if err > ATOL and r["status"] == "pass":
                    r.update(status="fail", step=k, at_length=len(history))
            elif s[0] == "reload":
                eng.reload(0)
            elif s[0] == "rollback":
                eng.rollback(0, s[1])
                del history[len(history) - s[1]:]
    except Unsupported as e:
        r.update(status="unsupported", step=locals().get("k"), message=str(e))
    except Exception as e:
        where = traceback.extract_tb(e.__traceback__)[-1]
        r.update(status="error", step=locals().get("k"),
                 message=f"{type(e).__name__}: {e} ({os.path.basename(where.filename)}:{where.lineno})"[:600])
    r["seconds"] = round(time.time() - t0, 2)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--models", default="gemma2-w4,gemma3-w3,gemma3-irregular-w4,mistral-w5")
    ap.add_argument("--caches", default="dynamic,static,hybrid")
    ap.add_argument("--attentions", default="eager,sdpa,flex")
    ap.add_argument("--paddings", default="0,3")
    ap.add_argument("--plans", default="base,reload,rollback,rollback-early")
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("--record-past", action="store_true", help="also run the rollback plans with record_past=true")
    ap.add_argument("--unchecked-crop", action="store_true", help="also run the rollback plans with crop=unchecked")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for model in a.models.split(","):
        model_dir = os.path.join(a.models_dir, model)
        ref = Reference(model_dir)
        for cache in a.caches.split(","):
            for attention in a.attentions.split(","):
                for padding in [int(p) for p in a.paddings.split(",")]:
                    for plan in a.plans.split(","):
                        variants = [{}]
                        if plan.startswith("rollback"):
                            variants += [{"record_past": True}] if a.record_past else []
                            variants += [{"crop": "unchecked"}] if a.unchecked_crop else []
                        for extra in variants:
                            options = {"cache": cache, "attention": attention, "left_padding": padding, **extra}
                            r = run(model_dir, ref, options, PLANS[plan])
                            r = {"transformers": transformers.__version__, "model": model, "plan": plan, **options, **r}
                            rows.append(r)
                            print(json.dumps(r), flush=True)
        if a.mutants:
            for mutant in ("window_off_by_one+1", "window_off_by_one-1", "full_attention_on_sliding"):
                r = run(model_dir, ref, {"cache": "dynamic", "attention": "eager"}, PLANS["base"], mutant)
                r = {"transformers": transformers.__version__, "model": model, "plan": "base", "mutant": mutant, **r}
                rows.append(r)
                print(json.dumps(r), flush=True)
    for r in rows:
        opts = f"{r.get('cache', 'dynamic')}/{r.get('attention', 'eager')}/P{r.get('left_padding', 0)}"
        if r.get("record_past"):
            opts += "/record_past"
        if r.get("crop"):
            opts += "/" + r["crop"]
        print(f"{r['transformers']:8} {r['model']:20} {r['plan']:15} {r.get('mutant', ''):9} {opts:28} "
              f"{r['status']:11} {r['max_err']:.2e} {r.get('message', '')[:160]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
