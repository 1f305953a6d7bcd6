#!/usr/bin/env python3
"""The conformance matrix (docs/conformance.md): implementation x dtype x scenario class -> OK / FAIL /
DEVIATION / SKIP with the largest measured error, as a Markdown table.

    scripts/matrix.py [--plugin LIB.so]... [--backend-cmd 'CMD']... [--no-builtin] [--out FILE]

Each implementation is one `kvconform run -v` (the built-in attention backends: their CPU suite;
plugins and --backend-cmd workers: their kernel checks without golden cases and campaign), read back
from its summary.json. The cases are the built-in step patterns (harness/include/kvconform/
step_patterns.h) on static and dynamic layers; a cell takes the worst status of its cases (FAIL >
DEVIATION > OK > SKIP) and the largest error any of them measured against the float64 oracle
(for a failure: the error that broke the bound). Cells are "OK 2.4e-04", "FAIL 3.0e-01",
"OK 1.2e-07 (2/4 SKIP)" when part of the class was unsupported, "SKIP" when all of it was.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = ["float32", "float16", "bfloat16", "float64"]
# Scenario classes over the step patterns' names (a pattern may serve several classes).
CLASSES = [
    ("decode across the window", ["decode_across_window", "wrap_around_three_times", "cache_shorter_than_window",
                                  "reset_and_restart"]),
    ("multi-token update after full", ["prefill_longer_than_window", "prefill_equal_window_then_extend"]),
    ("chunked", ["chunked_across_chunks"]),
    ("left padding, fully masked rows", ["sliding_left_padding_batch", "chunked_left_padding"]),
    ("chunked + left padding", ["chunked_left_padding"]),
    # heads != kv_heads in step_patterns.h: 4/2 (GQA) and 2/1 (MQA)
    ("GQA / MQA", ["prefill_longer_than_window", "prefill_equal_window_then_extend", "chunked_across_chunks",
                   "chunked_left_padding", "reset_and_restart", "full_attention"]),
    ("full attention", ["full_attention"]),
]
RANK = {"FAIL": 3, "DEVIATION": 2, "OK": 1, "SKIP": 0}
ERROR = re.compile(r"max error ([0-9.eE+-]+|nan|inf)")


def run(kvconform, args, label):
    with tempfile.TemporaryDirectory() as reports:
        cmd = [kvconform, "run", "-v", "--report-dir", reports, *args]
        print(f"matrix: {label}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        path = os.path.join(reports, "summary.json")
        if done.returncode not in (0, 1) or not os.path.exists(path):
            sys.exit(f"matrix: {label} exited {done.returncode}: {done.stderr[-2000:]}")
        with open(path) as f:
            return json.load(f)["cases"]


def pattern_of(case):
    name = case["name"]
    if case["suite"] == "plugin":
        parts = name.split("/")
        return parts[1] if parts[0] == "kernel" and len(parts) == 3 else None
    return name.split("/")[0] if case["suite"] == "backend" else None


def error_of(case):
    errors = [float(m) for m in ERROR.findall(case.get("message", "") + "\n" + case.get("detail", ""))]
    return max(errors) if errors else None


def cell(cases):
    if not cases:
        return "–"
    status = max((c["status"] for c in cases), key=lambda s: RANK.get(s, 3))
    judged = [c for c in cases if c["status"] != "SKIP"]
    if not judged:
        return "SKIP"
    errors = [e for e in map(error_of, judged) if e is not None]
    text = status + (f" {max(errors):.1e}" if errors else "")
    skipped = len(cases) - len(judged)
    return text + (f" ({skipped}/{len(cases)} SKIP)" if skipped else "")


def table(rows):
    head = "| implementation | dtype | " + " | ".join(name for name, _ in CLASSES) + " |"
    lines = [head, "|" + " --- |" * (len(CLASSES) + 2)]
    for implementation, cases in rows:
        for dtype in DTYPES:
            cells = []
            for _, patterns in CLASSES:
                cells.append(cell([c for c in cases if c["dtype"] == dtype and pattern_of(c) in patterns]))
            lines.append(f"| {implementation} | {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvconform", default=os.path.join(ROOT, "build/cli/kvconform"))
    ap.add_argument("--plugin", action="append", default=[], help="a plugin shared library (repeatable)")
    ap.add_argument("--backend-cmd", action="append", default=[], help="a worker command line (repeatable)")
    ap.add_argument("--backend-timeout", default="30")
    ap.add_argument("--no-builtin", action="store_true", help="leave out eager, sdpa, sdpa_is_causal, windowed")
    ap.add_argument("--out", help="write the table here (default: stdout)")
    a = ap.parse_args()
    empty = tempfile.mkdtemp()  # no golden cases: the matrix is over the step patterns
    rows = []
    if not a.no_builtin:
        # The backend suite runs beside goldens and properties: no golden case matches, one property case.
        cases = run(a.kvconform, ["--case", "^no golden case$", "--property", "^backends_vs_oracle$", "--iterations", "1"],
                    "built-in backends")
        for backend in ["eager", "sdpa", "sdpa_is_causal", "windowed"]:
            rows.append((backend, [c for c in cases if c["suite"] == "backend" and c["backend"] == backend]))
    common = ["--plugin-iterations", "0", "--cases", empty]
    for path in a.plugin:
        cases = run(a.kvconform, ["--plugin", path, *common], path)
        rows.append((next((c["backend"] for c in cases if c["suite"] == "plugin"), path), cases))
    for command in a.backend_cmd:
        cases = run(a.kvconform, ["--backend-cmd", command, "--backend-timeout", a.backend_timeout, *common], command)
        rows.append((next((c["backend"] for c in cases if c["suite"] == "plugin"), command), cases))
    os.rmdir(empty)
    text = table(rows)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
