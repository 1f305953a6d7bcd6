#!/usr/bin/env python3
"""docs/mutants.md's table of the adapter mutants, made from the two tables that define them:
engines/protocol.json "mutants" (each mutant's one name, what it does, its kind, the diagnosis kind it is
caught as and the spelling it replaced: `kvconform engine --protocol`) and engines/mutant_tests.json (the
ctests that show each caught: mutant x target x expected text).

    python3 scripts/mutant_table.py            # print the table
    python3 scripts/mutant_table.py --check    # exit 1 when docs/mutants.md's table is not it
    python3 scripts/mutant_table.py --write    # rewrite docs/mutants.md's table in place
"""
import argparse
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOC = os.path.join(ROOT, "docs", "mutants.md")
BEGIN = "<!-- the adapter mutants: scripts/mutant_table.py --write -->"
END = "<!-- end of the adapter mutants -->"


def load(name):
    with open(os.path.join(ROOT, "engines", name), encoding="utf-8") as f:
        return json.load(f)


def table():
    tests = {}
    for row in load("mutant_tests.json")["tests"]:
        tests.setdefault(row["mutant"], []).append(row["target"])
    lines = ["| mutant | kind | does | diagnosis | replaces | ctest targets |", "| --- | --- | --- | --- | --- | --- |"]
    for m in load("protocol.json")["mutants"]:
        kind = m["kind"] + (f" ({m['operation']})" if "operation" in m else "")
        diagnosis = f"`{m['diagnosis']}`" if "diagnosis" in m else ""
        old = f"`{m['replaces']}`" if "replaces" in m else ""
        targets = ", ".join(f"`{t}`" for t in dict.fromkeys(tests.get(m["name"], [])))
        lines.append(f"| `{m['name']}` | {kind} | {m['does']} | {diagnosis} | {old} | {targets} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/mutants.md's table differs")
    ap.add_argument("--write", action="store_true", help="rewrite docs/mutants.md's table")
    a = ap.parse_args()
    want = table()
    if not (a.check or a.write):
        sys.stdout.write(want)
        return 0
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    head, rest = doc.split(BEGIN, 1)
    have, tail = rest.split(END, 1)
    if a.write:
        with open(DOC + ".tmp", "w", encoding="utf-8") as f:
            f.write(head + BEGIN + "\n" + want + END + tail)
        os.replace(DOC + ".tmp", DOC)
        return 0
    if have.strip("\n") != want.strip("\n"):
        print("docs/mutants.md: the adapter mutants' table is not engines/protocol.json's and engines/mutant_tests.json's; "
              "python3 scripts/mutant_table.py --write", file=sys.stderr)
        return 1
    print("docs/mutants.md: the adapter mutants' table is the tables'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
