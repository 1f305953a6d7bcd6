#!/usr/bin/env python3
"""Where CI's minutes go: one Markdown table from what .ci/run recorded.

    python3 scripts/ci_minutes.py [--phases build/ci-phases.tsv] [--junit build/ctest-junit.xml]
                                  [--build build] [--update docs/performance.md [--block NAME]]
                                  [--costs scripts/ctest-costs.txt]

.ci/run times every phase into build/ci-phases.tsv (name, wall seconds, the machine's busy CPU
seconds meanwhile; a "cores" row gives the core count) and has ctest write JUnit with each test's
time; the test labels come from `ctest --show-only=json-v1` in the build folder. The table gives
each phase's wall time and CPU and, for ctest, each label's test count and summed test time
(tests run two at a time, so the sum is about twice the phase's wall time) and the slowest tests.
--update replaces the table between the `<!-- ci-minutes:begin -->` and `<!-- ci-minutes:end -->`
markers of that file (with --block cold, `<!-- ci-minutes cold:begin -->` ...: a second table, of a
cold run). --costs FILE writes the build's measured test costs (ctest's own
Testing/Temporary/CTestCostData.txt, the tests that exist now and took at least half a second) for
scripts/test.sh to seed a fresh build with, so that ctest starts the longest tests first on a clean
clone too, instead of in declaration order.
Standard library only.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET



def markers(block):
    """The begin and end markers of a table in a document: the warm run's, or a named block's."""
    name = "ci-minutes" + (f" {block}" if block else "")
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def read_phases(path):
    """(name, wall s, busy CPU s or None) rows, and the machine's core count (a "cores" row) or None."""
    rows, cores = [], None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 2:
                parts.append("")
            if len(parts) != 3 or not parts[1].isdigit() or not (parts[2] == "" or parts[2].isdigit()):
                sys.exit(f"{path}:{n}: expected 'NAME<TAB>SECONDS[<TAB>CPU SECONDS]', got {line!r}")
            if parts[0] == "cores":
                cores = int(parts[1])
                continue
            rows.append((parts[0], int(parts[1]), int(parts[2]) if parts[2] else None))
    return rows, cores


def read_junit(path):
    times = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        times[case.get("name")] = float(case.get("time") or 0)
    return times


def read_labels(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True).stdout
    labels = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = (props.get("LABELS") or ["(none)"])[0]
    return labels


def table(phases, times, labels, cores=None):
    # "PHASE / PART" rows (scripts/ci_phase.sh `part`) say where a phase's seconds went: printed under
    # their phase, indented, and not summed again. The CPU column is the machine's busy CPU while the
    # phase ran (every process, phases beside it included), and "busy cores" that over its wall time:
    # a phase near the core count is bound by its work, one well under it waits (on pip, a link).
    wall = {n: s for n, s, _ in phases}
    total = wall.get("total") or sum(s for n, s, _ in phases if " / " not in n)
    has_cpu = any(c is not None for _, _, c in phases)
    parts = collections.defaultdict(list)
    for name, s, c in phases:
        if " / " in name:
            parent, part = name.split(" / ", 1)
            parts[parent].append((part, s, c))

    def row(label, s, c, share=True):
        cells = [label, str(s), f"{100 * s / total:.0f} %" if total and share else ""]
        if has_cpu:
            cells += ["" if c is None else str(c), f"{c / s:.2f}" if c is not None and s else ""]
        return "| " + " | ".join(cells) + " |"

    head = ["phase", "wall s", "share"] + (["CPU s", "busy cores"] if has_cpu else [])
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for name, s, c in phases:
        if name != "total" and " / " not in name:
            lines.append(row(name, s, c))
            for part, ps, pc in parts.pop(name, []):
                lines.append(row(f"&nbsp;&nbsp;· {part}", ps, pc))
    total_cpu = next((c for n, _, c in phases if n == "total"), None)
    lines.append(row("**total**", total, total_cpu, share=False).replace(f"| {total} |", f"| **{total}** |", 1))
    if total_cpu is not None and cores:
        lines += ["", f"The run kept {total_cpu / total:.2f} of this machine's {cores} cores busy ({total_cpu} s of "
                      f"CPU in {total} s): the same work cannot take less than {total_cpu / cores:.0f} s on {cores} "
                      "cores, whatever runs beside what."]
    if times:
        by = collections.defaultdict(lambda: [0, 0.0])
        for name, s in times.items():
            b = by[labels.get(name, "(none)")]
            b[0] += 1
            b[1] += s
        lines += ["", "| ctest label | tests | summed test s |", "| --- | ---: | ---: |"]
        for label, (n, s) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| {label} | {n} | {s:.0f} |")
        lines += ["", "| slowest tests | s |", "| --- | ---: |"]
        for name, s in sorted(times.items(), key=lambda kv: -kv[1])[:10]:
            lines.append(f"| `{name}` | {s:.1f} |")
    return "\n".join(lines) + "\n"


def replace_block(path, begin, end, text):
    """Replaces what stands between the markers begin and end in the file at path, atomically."""
    try:
        doc = open(path).read()
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    m = re.search(re.escape(begin) + r".*?" + re.escape(end), doc, re.S)
    if not m:
        sys.exit(f"{path}: no {begin} ... {end} block to replace")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(doc[: m.start()] + begin + "\n" + text + end + doc[m.end():])
    os.replace(tmp, path)


def write_costs(build, out):
    """ctest's cost file (name, runs, average seconds per line, then "---" and the failed tests), kept
    to the tests the build lists now, without the failed list."""
    listed = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                                       stdout=subprocess.PIPE, text=True).stdout)
    names = {t["name"] for t in listed.get("tests", [])}
    rows = []
    with open(os.path.join(build, "Testing", "Temporary", "CTestCostData.txt")) as f:
        for line in f:
            if line.strip() == "---":
                break
            parts = line.split()
            if len(parts) == 3 and parts[0] in names and float(parts[2]) >= 0.5:
                rows.append(f"{parts[0]} 1 {float(parts[2]):.1f}\n")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(sorted(rows))
        f.write("---\n")
    os.replace(tmp, out)
    print(f"{out}: {len(rows)} test costs", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", default="build/ci-phases.tsv")
    ap.add_argument("--junit", default="build/ctest-junit.xml")
    ap.add_argument("--build", default="build")
    ap.add_argument("--update", metavar="FILE", help="replace the table between the ci-minutes markers of FILE")
    ap.add_argument("--block", metavar="NAME", help="with --update: the table between the 'ci-minutes NAME' markers")
    ap.add_argument("--costs", metavar="FILE", help="write the build's measured test costs (for scripts/test.sh)")
    a = ap.parse_args()
    if a.costs:
        write_costs(a.build, a.costs)
        return 0
    if not os.path.exists(a.phases):
        sys.exit(f"{a.phases}: not found (run .ci/run first)")
    phases, cores = read_phases(a.phases)
    times = read_junit(a.junit) if os.path.exists(a.junit) else {}
    labels = read_labels(a.build) if times else {}
    text = table(phases, times, labels, cores)
    if not a.update:
        sys.stdout.write(text)
        return 0
    replace_block(a.update, *markers(a.block), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
