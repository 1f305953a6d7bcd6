#!/usr/bin/env python3
"""The model oracle (C++, kvc-model-oracle) against transformers' own no-cache float64 forward,
for every model of the zoo and every pinned release whose environment exists.

    python3 engines/transformers/oracle_agreement.py [--oracle build/harness/kvc-model-oracle] [--models DIR] [--json]

Two numbers per model and release: the max |logit difference| against transformers with its float32
islands patched to float64 (--exact: must be <= 1e-10, else exit 1), and against transformers as
shipped (its float32 islands: RMSNorm, rotary cos/sin, eager softmax; reported, not judged).
Exit 77 (CTest's skip) when no release's environment exists.
Standard library only; each release runs in its own golden/.venv-<version>.
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUND = 1e-10
RUN_RELEASE = """
import os, sys
import nocache_forward  # engines/transformers is on PYTHONPATH
root, models_dir, tokens, tmp, v, *models = sys.argv[1:]
tokens = [int(t) for t in tokens.split(",")]
for mode in ("plain", "exact"):
    for m in models:
        logits, _, _ = nocache_forward.run(os.path.join(models_dir, m), tokens, exact=mode == "exact")
        open(os.path.join(tmp, f"{v}.{m}.{mode}"), "wb").write(logits.contiguous().numpy().astype("<f8").tobytes())
"""


def read_f64(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack(f"<{len(data) // 8}d", data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default=os.path.join(ROOT, "build/harness/kvc-model-oracle"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build/engine-models"))
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    subprocess.run([sys.executable, os.path.join(ROOT, "engines/models/make_models.py"), a.models], check=True, stdout=subprocess.DEVNULL)
    tokens = ",".join(str(1 + (37 * i + 11) % 255) for i in range(a.tokens))
    releases = sorted(p.split("requirements-")[1][:-4] for p in glob.glob(os.path.join(ROOT, "golden/requirements-*.txt")))
    rows, failed, checked = [], False, 0
    models = sorted(m for m in os.listdir(a.models) if os.path.isfile(os.path.join(a.models, m, "config.json")))
    with tempfile.TemporaryDirectory() as tmp:
        # One interpreter per release runs every model, plain first: --exact patches classes for good.
        for v in releases:
            py = os.path.join(ROOT, f"golden/.venv-{v}/bin/python")
            if os.path.exists(py):
                subprocess.run([py, "-c", RUN_RELEASE, ROOT, a.models, tokens, tmp, v] + models, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "engines", "transformers")))
        for model in models:
            mdir = os.path.join(a.models, model)
            if not os.path.isfile(os.path.join(mdir, "config.json")):
                continue
            subprocess.run([a.oracle, mdir, tokens, os.path.join(tmp, "oracle")], check=True, stdout=subprocess.DEVNULL)
            ours = read_f64(os.path.join(tmp, "oracle"))
            for v in releases:
                py = os.path.join(ROOT, f"golden/.venv-{v}/bin/python")
                if not os.path.exists(py):
                    rows.append({"model": model, "release": v, "skipped": "no golden/.venv-" + v})
                    continue
                diffs = {mode: max(abs(x - y) for x, y in zip(ours, read_f64(os.path.join(tmp, f"{v}.{model}.{mode}"))))
                         for mode in ("exact", "plain")}
                checked += 1
                bad = diffs["exact"] > BOUND
                failed |= bad
                rows.append({"model": model, "release": v, "exact": diffs["exact"], "plain": diffs["plain"], "ok": not bad})
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'model':22} {'release':8} {'vs exact float64':>17} {'vs as shipped':>14}")
        for r in rows:
            if "skipped" in r:
                print(f"{r['model']:22} {r['release']:8} SKIP {r['skipped']}")
            else:
                print(f"{r['model']:22} {r['release']:8} {r['exact']:17.3e} {r['plain']:14.3e}{'' if r['ok'] else '  > 1e-10: FAIL'}")
        print(f"{checked - sum(1 for r in rows if r.get('ok') is False)} passed, {sum(1 for r in rows if r.get('ok') is False)} failed")
    if not checked:
        print("no pinned transformers environment (bash golden/setup_env.sh VERSION): nothing checked", file=sys.stderr)
        return 77
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
