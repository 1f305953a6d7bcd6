#!/usr/bin/env python3
"""Converts a known-deviations file (the `kvconform engine --known` format: {"deviations": [...]},
each entry an engine, model, family and plan regex, a note and one of diagnosis, error, failure)
into the expectations format (docs/expectations.md): one "fail" entry per deviation, the engine,
model and plan regexes joined into one regex over the case id engine/<engine>/<model>/<plan>, the
family, diagnosis, error and failure kept as they are, the note as its reason.

    python3 scripts/known_to_expectations.py OLD.json > expectations.jsonc

A model or plan regex anchored at both ends or at its start (as every one of this project's was)
becomes the id's segment; others are refused, naming the entry, rather than converted loosely.
"""
import argparse
import json
import sys


def segment(regex: str, what: str, where: str) -> str:
    """A model or plan regex as a regex over its own id segment (no '/' inside one)."""
    if regex in (".", ".*", ""):
        return "[^/]+"
    if regex.startswith("^") and regex.endswith("$") and not regex.endswith("\\$"):
        return regex[1:-1]
    if regex.startswith("^"):
        return regex[1:] + "[^/]*"
    sys.exit(f"{where}/{what}: {regex!r}: only a regex anchored with ^ converts exactly; write the entry's \"case\" by hand")


def case_pattern(entry: dict, where: str) -> str:
    engine = entry["engine"]
    head = "^engine/" + engine[1:] if engine.startswith("^") else "^engine/.*" + engine
    model, plan = entry.get("model", "."), entry.get("plan", ".")
    if model in (".", ".*", "") and plan in (".", ".*", ""):
        return head
    return head + ".*/" + segment(model, "model", where) + "/" + segment(plan, "plan", where) + "$"


def convert(entry: dict, where: str) -> dict:
    out = {"case": case_pattern(entry, where), "outcome": "fail"}
    if entry.get("family", ".") not in (".", ".*", ""):
        out["family"] = entry["family"]
    for key in ("diagnosis", "error", "failure"):
        if key in entry:
            out[key] = entry[key]
    if "explanation" in entry:
        sys.exit(f"{where}: the old \"explanation\" form has no equivalent: give a diagnosis, error or failure")
    out["reason"] = entry["note"]
    return out


def render(entries: list, header: str) -> str:
    lines = [f"// {row}" if row else "//" for row in header.splitlines()]
    lines += ["{", '  "expectations": [']
    for i, e in enumerate(entries):
        body = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in e.items())
        lines.append("    {\n" + body + "\n    }" + ("," if i + 1 < len(entries) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("known", help="the old known-deviations JSON file")
    a = p.parse_args()
    with open(a.known) as f:
        doc = json.load(f)
    entries = [convert(e, f"{a.known}: /deviations/{i}") for i, e in enumerate(doc["deviations"])]
    sys.stdout.write(render(entries, f"kvconform expectations (docs/expectations.md), converted from {a.known}."))


if __name__ == "__main__":
    main()
