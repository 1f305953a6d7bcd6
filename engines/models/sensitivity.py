#!/usr/bin/env python3
"""Does moving a model's window by one token move its logits far above the engine checks' bound?

    python3 engines/models/sensitivity.py [--oracle build/harness/kvc-model-oracle] [--min 0.01] MODEL_DIR...

A drawn model judges windows only if a window one token larger changes its logits: for each model,
the model oracle (float64) runs 2W + 2 tokens with its own windows (or chunks) and with each one a
token larger, and the largest |logit difference| must reach --min (default 1e-2: a hundred times the
engine checks' 1e-4 floor). One line per model: OK, INSENSITIVE (such a model must not judge a
window: redraw it) or NO-WINDOW (no sliding or chunked layer: nothing to judge). Exit 1 if any model is
INSENSITIVE, 2 on bad input. Standard library only.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(oracle, model, tokens, out, delta):
    r = subprocess.run([oracle, model, ",".join(map(str, tokens)), out] + (["--span-delta", str(delta)] if delta else []),
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or f"exit {r.returncode}")
    with open(out, "rb") as f:
        data = f.read()
    return json.loads(r.stdout), struct.unpack(f"<{len(data) // 8}d", data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--oracle", default=os.path.join(ROOT, "build/harness/kvc-model-oracle"))
    ap.add_argument("--min", type=float, default=1e-2)
    a = ap.parse_args()
    insensitive = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits")
        for model in a.models:
            name = os.path.basename(os.path.normpath(model))
            try:
                info, _ = run(a.oracle, model, [1], out, 0)
                if not info["local_layers"]:
                    print(f"{name}: NO-WINDOW (no sliding or chunked layer)")
                    continue
                span = info["span"]
                tokens = [1 + (37 * i + 11) % 255 for i in range(2 * span + 2)]
                _, base = run(a.oracle, model, tokens, out, 0)
                _, moved = run(a.oracle, model, tokens, out, 1)
            except (RuntimeError, ValueError, KeyError) as e:
                print(f"{name}: ERROR {e}", file=sys.stderr)
                return 2
            diff = max(abs(x - y) for x, y in zip(base, moved))
            ok = diff >= a.min
            insensitive += not ok
            print(f"{name}: {'OK' if ok else 'INSENSITIVE'} (W={span}, {len(tokens)} tokens: a window of W+1 moves the "
                  f"logits by {diff:.3g}, needed {a.min:g})", flush=True)
    return 1 if insensitive else 0


if __name__ == "__main__":
    sys.exit(main())
