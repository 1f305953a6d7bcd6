#!/usr/bin/env python3
"""What a drawn model of each family costs, measured: the table of studies/engines/results.md "Performance".

    python3 scripts/family_costs.py [--build build] [--seed S] [--tokens N] [--engine REGEX]
                                    [--iterations K] [--update studies/engines/results.md]

For every family of the model generator (engines/models/families.py), draw 0 of the seed (the one
`kvconform engine --plans models --seed S` draws first), timed on this machine:
  * drawing its recipe and writing its checkpoint (config.json + safetensors), in process;
  * the model oracle (kvc-model-oracle) over N tokens, float64 (the judge's oracle) and float32 (its
    same-dtype reference): positions per second, the checkpoint's load included;
  * llama.cpp's conversion to a GGUF (engines/llama_cpp/convert.py with the 0.3.36 source, under
    transformers 5.24.0's environment), where both are installed: "refused" where this llama.cpp
    does not convert the architecture;
  * each engine configuration the regex picks (default: the CI's one per engine) on the family's model
    campaign (`kvconform engine --plans models --family F --iterations K`): plan-steps per second in
    the engine, as the engine line on stderr says; "–" where the engine ran no plan-step (not installed,
    or every pair was refused or failed at load: studies/engines/results.md's model campaign table says which).
--update replaces the block between the `<!-- family-costs -->` markers of that file.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engines", "models"))
import families  # noqa: E402
import make_models  # noqa: E402
from ci_minutes import replace_block  # noqa: E402  scripts/ is on sys.path when this runs as a script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- family-costs:begin -->", "<!-- family-costs:end -->"
ENGINES = "^(oracle|transformers-5.24.0/dynamic/sdpa|llama.cpp/default|mlx-lm)$"
ENGINE_LINE = re.compile(r"^engine (.+): (\d+) plan-steps, ([0-9.]+) steps/s in the engine", re.M)


def shape(cfg):
    """'4 layers, W=512, head_dim 32' (the draw's window or chunk: the layers that use one)."""
    span = cfg.get("sliding_window") or cfg.get("attention_chunk_size")
    kind = "C" if cfg.get("attention_chunk_size") else "W"
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    layers = cfg["num_hidden_layers"]
    where = f"{kind}={span}" if span else "no window"
    return f"{layers} layer{'' if layers == 1 else 's'}, {where}, head_dim {hd}"


def rate(cmd, n):
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"family_costs: {' '.join(cmd[:2])} exited {p.returncode}: {p.stderr[-500:]}")
    return n / took


def convert_seconds(model_dir, out):
    py = os.path.join(ROOT, "golden/.venv-5.24.0/bin/python")
    src = os.path.join(os.environ.get("KVC_CACHE", os.path.expanduser("~/.cache/kvconform")), "llama-0.3.36/src")
    if not (os.access(py, os.X_OK) and os.path.isdir(src)):
        return "–"
    start = time.monotonic()
    p = subprocess.run([py, "engines/llama_cpp/convert.py", model_dir, out, "--src", src], cwd=ROOT, capture_output=True, text=True)
    took = time.monotonic() - start
    if p.returncode == 3:
        return "refused"
    if p.returncode != 0:
        return f"fails ({p.stderr.strip().splitlines()[-1][:60] if p.stderr.strip() else p.returncode})"
    return f"{took:.1f}"


def engine_rates(kvconform, family, seed, iterations, engines):
    cmd = [kvconform, "engine", "--plans", "models", "--family", f"^{family}$", "--seed", str(seed),
           "--iterations", str(iterations), "--engine", engines, "--no-report", "--no-regressions"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = {}
    for name, steps, per_s in ENGINE_LINE.findall(p.stderr):
        out[name] = f"{float(per_s):.0f}" if int(steps) else "–"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seed", type=int, default=20250917)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--engine", default=ENGINES, help="engine configurations whose plan-steps/s to measure")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--update", metavar="FILE")
    a = ap.parse_args()
    oracle = os.path.join(a.build, "harness/kvc-model-oracle")
    kvconform = os.path.join(a.build, "cli/kvconform")
    rows, engine_names = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for family in families.DRAWN_FAMILIES:
            start = time.monotonic()
            r = make_models.recipe(family, a.seed, 0)
            drew = time.monotonic() - start
            start = time.monotonic()
            d, _ = make_models.write(tmp, r["name"], (r["layout"], r["config"]), r["folder"], whole=True)
            wrote = time.monotonic() - start
            vocab = r["config"]["vocab_size"]
            tokens = ",".join(str(1 + (i * 7919 + 13) % (vocab - 1)) for i in range(a.tokens))
            f64 = rate([oracle, d, tokens, os.path.join(tmp, "logits.bin")], a.tokens)
            f32 = rate([oracle, d, tokens, os.path.join(tmp, "logits.bin"), "--float32"], a.tokens)
            conv = convert_seconds(d, os.path.join(tmp, "model.gguf"))
            rates = engine_rates(kvconform, family, a.seed, a.iterations, a.engine)
            for name in rates:
                if name not in engine_names:
                    engine_names.append(name)
            rows.append((family, r["name"], shape(r["config"]), drew, wrote, f64, f32, conv, rates))
            print(f"family_costs: {family} done", file=sys.stderr)
    load = os.getloadavg()[0]
    lines = [f"Measured by `python3 scripts/family_costs.py` (seed {a.seed}, draw 0 of each family, {a.tokens} tokens; "
             f"the load average was {load:.1f} on this machine's {os.cpu_count()} cores when it ended). Plan-steps/s: "
             f"the family's model campaign ({a.iterations} drawn pairs) as each engine line reports it; – where the engine ran "
             "no plan-step (not installed, or every pair refused or failed at load).", "",
             "| family | drawn model | draw ms | write ms | oracle float64 positions/s | float32 reference positions/s | "
             "llama.cpp convert s | " + " | ".join(f"`{e}` plan-steps/s" for e in engine_names) + " |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * len(engine_names)]
    for family, name, shp, drew, wrote, f64, f32, conv, rates in rows:
        lines.append(f"| `{family}` | `{name}` ({shp}) | {drew * 1e3:.1f} | {wrote * 1e3:.0f} | {f64:.0f} | {f32:.0f} | {conv} | "
                     + " | ".join(rates.get(e, "–") for e in engine_names) + " |")
    text = "\n".join(lines) + "\n"
    if a.update:
        replace_block(a.update, BEGIN, END, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
