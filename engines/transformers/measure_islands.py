#!/usr/bin/env python3
"""How big transformers' float32 islands are: max |logit| difference between the plain float64
forward (transformers as shipped) and the --exact one (exact64.py), per model, for this release.

    golden/.venv-5.24.0/bin/python engines/transformers/measure_islands.py MODELS_DIR [--n 600]

One JSON line per model: {"model", "transformers", "n", "max_abs_diff", "max_abs_diff_first_64", "logit_absmax"}.
Plain runs first for every model (the exact patches are process-wide), then exact.
"""
import argparse
import json
import os
import sys

import torch
import transformers

from nocache_forward import forward, load_float64  # a sibling: the script's folder is on sys.path


def tokens(n):
    return [(7 * i * i + 3 * i + 5) % 253 + 3 for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--n", type=int, default=600)
    a = ap.parse_args()
    torch.set_num_threads(1)
    names = sorted(os.listdir(a.models_dir))
    toks = tokens(a.n)
    plain = {m: forward(load_float64(os.path.join(a.models_dir, m), False)[0], toks) for m in names}
    for m in names:
        exact = forward(load_float64(os.path.join(a.models_dir, m), True)[0], toks)
        d = (plain[m] - exact).abs()
        print(json.dumps({"model": m, "transformers": transformers.__version__, "n": a.n,
                          "max_abs_diff": float(d.max()), "max_abs_diff_first_64": float(d[:64].max()),
                          "logit_absmax": float(exact.abs().max())}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
