#!/usr/bin/env python3
"""The conformance matrix (docs/conformance.md): implementation x dtype x scenario class -> OK / FAIL /
DEVIATION / SKIP with the largest measured error, as a Markdown table.

    scripts/matrix.py [--plugin LIB.so]... [--backend-cmd 'CMD']... [--no-builtin] [--out FILE] [--reports DIR]

Each implementation is one `kvconform run -v` (the built-in attention backends: their CPU suite;
plugins and --backend-cmd workers: their kernel checks without golden cases and campaign), read back
from its summary.json (--reports DIR keeps each run's folder, which `kvconform site` shows as its kernels
page). The table is kvconform.site's (python/kvconform/site.py). The cases are the built-in step
patterns (harness/include/kvconform/step_patterns.h) on static and dynamic layers; a cell takes the worst status of its cases (FAIL >
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
sys.path.insert(0, os.path.join(ROOT, "python"))
from kvconform.site import kernel_markdown  # noqa: E402  (the same table as `kvconform site`'s kernels page)


def run(kvconform, args, label, keep=None):
    with tempfile.TemporaryDirectory() as reports:
        if keep:
            reports = os.path.join(keep, re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_"))
        cmd = [kvconform, "run", "-v", "--report-dir", reports, *args]
        print(f"matrix: {label}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        path = os.path.join(reports, "summary.json")
        if done.returncode not in (0, 1) or not os.path.exists(path):
            sys.exit(f"matrix: {label} exited {done.returncode}: {done.stderr[-2000:]}")
        with open(path) as f:
            return json.load(f)["cases"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvconform", default=os.path.join(ROOT, "build/cli/kvconform"))
    ap.add_argument("--plugin", action="append", default=[], help="a plugin shared library (repeatable)")
    ap.add_argument("--backend-cmd", action="append", default=[], help="a worker command line (repeatable)")
    ap.add_argument("--backend-timeout", default="30")
    ap.add_argument("--no-builtin", action="store_true", help="leave out eager, sdpa, sdpa_is_causal, windowed")
    ap.add_argument("--out", help="write the table here (default: stdout)")
    ap.add_argument("--reports", help="keep each run's report folder under this folder (for `kvconform site DIR/*`)")
    a = ap.parse_args()
    empty = tempfile.mkdtemp()  # no golden cases: the matrix is over the step patterns
    rows = []
    if not a.no_builtin:
        # The backend suite runs beside goldens and properties: no golden case matches, one property case.
        cases = run(a.kvconform, ["--case", "^no golden case$", "--property", "^backends_vs_oracle$", "--iterations", "1"],
                    "built-in backends", a.reports)
        for backend in ["eager", "sdpa", "sdpa_is_causal", "windowed"]:
            rows.append((backend, [c for c in cases if c["suite"] == "backend" and c["backend"] == backend]))
    common = ["--plugin-iterations", "0", "--cases", empty]
    for path in a.plugin:
        cases = run(a.kvconform, ["--plugin", path, *common], path, a.reports)
        rows.append((next((c["backend"] for c in cases if c["suite"] == "plugin"), path), cases))
    for command in a.backend_cmd:
        cases = run(a.kvconform, ["--backend-cmd", command, "--backend-timeout", a.backend_timeout, *common], command,
                    a.reports)
        rows.append((next((c["backend"] for c in cases if c["suite"] == "plugin"), command), cases))
    os.rmdir(empty)
    text = kernel_markdown(rows)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
