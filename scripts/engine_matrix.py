#!/usr/bin/env python3
"""Renders the engine matrix of docs/engines.md from the summary.json files of `kvconform engine`
runs, and rewrites the part of docs/engines.md between its matrix markers.

    bash scripts/engine_matrix.sh                 # runs every configuration (two shards), then this
    python3 scripts/engine_matrix.py reports/engine-matrix-*/summary.json [--doc docs/engines.md]

One table: a row per engine configuration (the engine's own version from its hello), a column per
model; a cell counts the fixed plans OK / DEVIATION / FAIL / SKIP with the largest error of the OK
ones. Below it, every cell that is not OK, by scenario class, with its verdict and message, and
every verdict that changed between two versions of one engine configuration.

    bash scripts/family_matrix.sh                 # the family x engine matrix: every engine on the families set
    python3 scripts/engine_matrix.py SUMMARY... --family-of DIR... --markers family-matrix --doc docs/engines.md

With --family-of, a column is a family (the model_type of DIR/<model>/config.json, the first DIR that has the
model) instead of a model: a cell counts every checkpoint of the family under every scenario class.
"""
import argparse
import json
import os
import re
import sys
from collections import defaultdict, OrderedDict



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summaries", nargs="+")
    ap.add_argument("--doc", default=None, help="rewrite the matrix section of this Markdown file")
    ap.add_argument("--command", default="bash scripts/engine_matrix.sh")
    ap.add_argument("--family-of", nargs="+", default=[], metavar="DIR",
                    help="columns by family: the model_type of DIR/<model>/config.json")
    ap.add_argument("--markers", default="engine matrix", help="the section's markers: <!-- MARKERS begin --> ... end")
    a = ap.parse_args()
    begin, end = f"<!-- {a.markers} begin -->", f"<!-- {a.markers} end -->"

    def column(model):
        for d in a.family_of:
            cfg = os.path.join(d, model, "config.json")
            if os.path.isfile(cfg):
                return json.load(open(cfg))["model_type"]
        if a.family_of:
            sys.exit(f"{model}: no config.json in {', '.join(a.family_of)} (--family-of)")
        return model
    by_id = OrderedDict()  # a case run again in a later summary replaces the earlier result
    for path in a.summaries:
        for c in json.load(open(path))["cases"]:
            by_id[c.get("id") or (c["suite"], c["backend"], c["name"])] = c
    cases = list(by_id.values())
    engines, models = OrderedDict(), OrderedDict()
    cells = defaultdict(list)
    version = {}
    for c in cases:
        if c["suite"] != "engine":
            continue
        model, plan = c["name"].split("/", 1)
        if a.family_of:
            model, plan = column(model), f"{model}/{plan}"
        engines[c["backend"]] = 1
        models[model] = 1
        cells[(c["backend"], model)].append((plan, c))
        m = re.match(r"engine: (.*)", c.get("detail", ""))
        if m and c["backend"] not in version:
            version[c["backend"]] = m.group(1).strip()
    models = sorted(models)
    out = [f"Measured with `{a.command}` (fixed plans; {len(cases)} cases). A cell: OK / DEVIATION (expected, "
           "engines/<engine>/expectations.jsonc) / FAIL / SKIP over the scenario classes, and the largest error of the OK ones.", ""]
    out.append("| engine configuration | version | dtype | " + " | ".join(f"`{m}`" if a.family_of else m for m in models) + " |")
    out.append("| --- | --- | --- | " + " | ".join("---" for _ in models) + " |")
    for e in engines:
        dtypes = sorted({c.get("dtype", "") for m in models for _, c in cells[(e, m)]})
        row = [f"`{e}`", version.get(e, ""), ", ".join(dtypes)]
        for m in models:
            got = cells[(e, m)]
            if not got:
                row.append("")
                continue
            n = defaultdict(int)
            worst = 0.0
            for _, c in got:
                n[c["status"]] += 1
                if c["status"] == "OK":
                    w = re.search(r"max error ([0-9.e+-]+)", c.get("message", ""))
                    worst = max(worst, float(w.group(1))) if w else worst
            parts = [f"{n[s]} {s}" for s in ("OK", "DEVIATION", "FAIL", "SKIP") if n[s]]
            row.append(" · ".join(parts) + (f" (≤ {worst:.1e})" if n["OK"] else ""))
        out.append("| " + " | ".join(row) + " |")
    out += ["", "Every cell that is not OK, grouped where the message is the same but for its numbers "
            "(model/scenario class: verdict, the first message):", ""]
    for e in engines:
        groups = OrderedDict()
        for m in models:
            for plan, c in cells[(e, m)]:
                if c["status"] == "OK":
                    continue
                msg = c.get("message", "")
                key = (c["status"], re.sub(r"[0-9][0-9.e+-]*", "#", msg)[:90])
                groups.setdefault(key, []).append((f"{m}/{plan}", msg))
        if not groups:
            continue
        out.append(f"- `{e}`")
        for (status, _), items in groups.items():
            msg = items[0][1].replace("|", "\\|")
            if len(msg) > 240:
                msg = msg[:237] + "..."
            where = ", ".join(f"`{w}`" for w, _ in items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")
            out.append(f"  - {where}: {status} {msg}")
    out += changes(engines, cells, models)
    text = "\n".join(out) + "\n"
    if not a.doc:
        sys.stdout.write(text)
        return 0
    doc = open(a.doc).read()
    if begin not in doc or end not in doc:
        sys.exit(f"{a.doc}: no {begin} ... {end} section")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(a.doc, "w").write(head + begin + "\n" + text + end + tail)
    return 0


def changes(engines, cells, models):
    """The configurations that differ only by the engine's version (`llama.cpp/default` and
    `llama.cpp-b11434/default`, `transformers-4.57.6/static/eager` and `transformers-5.24.0/...`):
    every model/scenario class whose verdict changed between the versions, grouped by the verdicts."""
    family = OrderedDict()
    for e in engines:
        family.setdefault(re.sub(r"^([^/]*?)-b?[0-9][0-9.]*(?=/|$)", r"\1", e, count=1), []).append(e)
    out = []
    for key, names in family.items():
        if len(names) < 2:
            continue
        verdicts = OrderedDict()
        for m in models:
            by_plan = OrderedDict()
            for e in names:
                for plan, c in cells[(e, m)]:
                    by_plan.setdefault(plan, {})[e] = c
            for plan, got in by_plan.items():
                if len(got) == len(names) and len({c["status"] for c in got.values()}) > 1:
                    verdicts.setdefault(tuple(got[e]["status"] for e in names), []).append((f"{m}/{plan}", got))
        if not verdicts:
            continue
        if not out:
            out += ["", "Between versions (the configurations that differ only by the engine's version), every "
                    "model/scenario class whose verdict changed:", ""]
        out.append(f"- `{key}`: " + ", ".join(f"`{e}`" for e in names))
        for statuses, items in verdicts.items():
            where = ", ".join(f"`{w}`" for w, _ in items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")
            first = items[0][1]
            msgs = "; ".join(f"`{e}`: {first[e]['status']} {first[e].get('message', '')[:140]}".replace("|", "\\|")
                             for e in names if first[e]["status"] != "OK")
            out.append(f"  - {where}: " + " → ".join(statuses) + (f" ({msgs})" if msgs else ""))
    return out


if __name__ == "__main__":
    sys.exit(main())
