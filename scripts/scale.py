#!/usr/bin/env python3
"""How the cost of a run grows with its work, measured: the tables of docs/performance.md "Scale".

    python3 scripts/scale.py [--build build] [--quick] [--update docs/performance.md]

Each row is one command timed on this machine (wall seconds, with the load average beside it):
  * the fast and the tensor trace engine against the number of traces (`kvconform run --properties-only`);
  * the model oracle (kvc-model-oracle, float64) against the sequence length, the window and the
    model width: mistral checkpoints of the zoo's weight stream with the window and the hidden size
    rewritten (positions/s; its floor is O(n * min(n, W) * d) attention work per layer beside the
    O(n * d^2) projections);
  * each engine of the CI (oracle, transformers, llama.cpp, mlx-lm where installed) against the
    number of random plans of the engine campaign (plan-steps/s as the engine reports them).
--update replaces the block between the `<!-- scale -->` markers of that file. Standard library only.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from ci_minutes import replace_block  # scripts/ is on sys.path when this runs as a script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- scale:begin -->", "<!-- scale:end -->"


def timed(cmd, env=None):
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    took = time.monotonic() - start
    if p.returncode not in (0, 1):
        sys.exit(f"scale: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return took, p.stdout + p.stderr


def load():
    return open("/proc/loadavg").read().split()[0]


def zoo():
    spec = importlib.util.spec_from_file_location("make_models", os.path.join(ROOT, "engines/models/make_models.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def trace_engines(kvc, quick):
    rows = ["| trace engine | property | traces | steps | wall s | steps/s | load |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for engine, prop, counts in (("fast", "stored_rows", (100, 400) if quick else (100, 1000, 10000)),
                                 ("tensor", "attention_vs_oracle", (25, 50) if quick else (25, 100, 400))):
        for n in counts:
            took, out = timed([kvc, "run", "--no-report", "--properties-only", "--property", f"^{prop}$", "--engine", engine,
                               "--iterations", str(n)])
            m = re.search(r"(\d+) cases, (\d+) steps", out)
            steps = int(m.group(2)) if m else 0
            rows.append(f"| {engine} | {prop} | {n} | {steps} | {took:.2f} | {steps / took:.0f} | {load()} |")
    return rows


def oracle(build, quick):
    mm = zoo()
    exe = os.path.join(build, "harness/kvc-model-oracle")
    rows = ["| hidden | window | tokens | wall s | positions/s | load |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    grid = [(64, w, n) for w in (4, 128, None) for n in ((64, 256) if quick else (256, 1024, 4096))]
    grid += [(h, 128, 256 if quick else 1024) for h in (128, 256)]
    with tempfile.TemporaryDirectory() as tmp:
        for hidden, window, n in grid:
            family, cfg = mm.config("mistral-w5")
            cfg = dict(cfg, hidden_size=hidden, intermediate_size=2 * hidden, sliding_window=window)
            saved = (mm.HIDDEN, mm.INTER)
            mm.HIDDEN, mm.INTER = hidden, 2 * hidden
            try:
                data = mm.safetensors_bytes(mm.tensors("mistral-w5", family, cfg))
            finally:
                mm.HIDDEN, mm.INTER = saved
            d = os.path.join(tmp, f"m{hidden}-{window}")
            os.makedirs(d, exist_ok=True)
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
            open(os.path.join(d, "model.safetensors"), "wb").write(data)
            tokens = ",".join(str(1 + (37 * i + 11) % 255) for i in range(n))
            took, _ = timed([exe, d, tokens, os.path.join(tmp, "out")])
            rows.append(f"| {hidden} | {window or 'full'} | {n} | {took:.2f} | {n / took:.0f} | {load()} |")
    return rows


def engines(kvc, quick):
    rows = ["| engine | random plans | plan-steps | wall s | plan-steps/s | load |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    checks = {"oracle": None, "transformers-5.24.0/dynamic/sdpa": "golden/.venv-5.24.0/bin/python",
              "llama.cpp/default": "build-llama/kvc_llama_worker", "mlx-lm": ".cache-marker-mlx"}
    for engine, needs in checks.items():
        if needs == ".cache-marker-mlx":
            if subprocess.run(["bash", "engines/setup_env.sh", "--check", "mlx"], cwd=ROOT, capture_output=True).returncode:
                rows.append(f"| {engine} | not installed | | | | |")
                continue
        elif needs and not os.path.exists(os.path.join(ROOT, needs)):
            rows.append(f"| {engine} | not installed | | | | |")
            continue
        for n in (2, 4) if quick else (4, 16):
            took, out = timed([kvc, "engine", "--engine", "^" + re.escape(engine) + "$", "--model", "^mistral-w5$", "--plans",
                               "campaign", "--iterations", str(n), "--no-report"])
            m = re.search(r"(\d+) plan-steps", out)
            steps = int(m.group(1)) if m else 0
            rows.append(f"| {engine} | {n} | {steps} | {took:.1f} | {steps / took:.1f} | {load()} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="a small grid (a smoke test of the script)")
    ap.add_argument("--update", metavar="FILE")
    a = ap.parse_args()
    kvc = os.path.join(a.build, "cli/kvconform")
    if not os.path.exists(kvc):
        sys.exit(f"scale: {kvc} not found (build first: bash scripts/setup.sh)")
    parts = ["Trace engines against the number of traces:", "", *trace_engines(kvc, a.quick), "",
             "The model oracle (float64, the 3-layer mistral-w5 checkpoint with its window and width rewritten; one process, load included) against tokens, window and width:", "",
             *oracle(a.build, a.quick), "", "Engines against the random plans of the campaign (model mistral-w5):", "",
             *engines(kvc, a.quick)]
    text = "\n".join(parts) + "\n"
    if not a.update:
        sys.stdout.write(text)
        return 0
    replace_block(a.update, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
