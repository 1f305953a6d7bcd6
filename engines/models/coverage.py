#!/usr/bin/env python3
"""Which local-attention families of a transformers release the model oracle's registry reads.

    python3 engines/models/coverage.py [--release 5.24.0]

Lists every model folder of the release whose configuration speaks of `sliding_attention` or
`chunked_attention`, or whose modeling file has attention sinks, beside the `model_type`s the
registry in harness/src/engine/model.cpp reads (its kRegistry table), as a Markdown table. The
release's own source is read from golden/.venv-<release>. Standard library only.
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def registry():
    src = open(os.path.join(ROOT, "harness/src/engine/model.cpp")).read()
    m = re.search(r"kRegistry\b[^{]*\{(.*?)\n\};", src, re.S)
    if not m:
        sys.exit("coverage: no kRegistry table in harness/src/engine/model.cpp")
    return set(re.findall(r'"([a-z0-9_]+)"', m.group(1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="5.24.0")
    a = ap.parse_args()
    models = glob.glob(os.path.join(ROOT, f"golden/.venv-{a.release}/lib/python3*/site-packages/transformers/models"))
    if not models:
        sys.exit(f"coverage: golden/.venv-{a.release} is not installed (bash golden/setup_env.sh {a.release})")
    covered = registry()
    rows = []
    for folder in sorted(os.listdir(models[0])):
        path = os.path.join(models[0], folder)
        text = lambda pattern: "".join(open(f, errors="replace").read() for f in glob.glob(os.path.join(path, pattern)))
        config, modeling = text("configuration_*.py"), text("modeling_*.py")
        kinds = [k for k, hit in (("sliding", "sliding_attention" in config), ("chunked", "chunked_attention" in config),
                                  ("sinks", re.search(r"\bsinks\b", modeling) is not None)) if hit]
        types = set(re.findall(r'model_type\s*=\s*"([a-z0-9_]+)"', config))
        # A folder's own model types (a multimodal folder's text config may name another family's).
        mine = sorted(t for t in types & covered if t.startswith(folder) or folder.startswith(t))
        if kinds or mine:
            rows.append((folder, ", ".join(kinds) or "through its decoder's config", ", ".join(mine) or "not read yet"))
    print(f"| transformers {a.release} folder | local attention | registry reads |")
    print("| --- | --- | --- |")
    for folder, kinds, mine in rows:
        print(f"| `{folder}` | {kinds} | {mine} |")
    print(f"\n{sum(1 for r in rows if r[2] != 'not read yet')} of {len(rows)} folders read by the registry.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
