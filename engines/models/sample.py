#!/usr/bin/env python3
"""A seeded sample of a model set's families, as a --model regular expression for `kvconform engine`.

    python3 engines/models/sample.py MODELS_DIR [--seed 0] [--count 3]

Reads each model's config.json under MODELS_DIR (make_models.py writes them), groups the models by
model_type, and picks --count families by the order of sha256(seed, model_type), then one model of each
by sha256(seed, name): the same seed gives the same sample on every machine, another seed another one.
Prints `^(name|name|...)$`. CI runs the engine configurations that a full run gives every family
(scripts/family_matrix.sh) on such a sample. Standard library only.
"""
import argparse
import hashlib
import json
import os
import sys


def rank(seed, text):
    return hashlib.sha256(f"{seed}\0{text}".encode()).hexdigest()


def sample(models_dir, seed, count):
    by_type = {}
    for name in sorted(os.listdir(models_dir)):
        path = os.path.join(models_dir, name, "config.json")
        if os.path.isfile(path):
            with open(path) as f:
                by_type.setdefault(json.load(f).get("model_type", "?"), []).append(name)
    if not by_type:
        raise SystemExit(f"sample: no model (a folder with a config.json) in {models_dir}")
    families = sorted(by_type, key=lambda t: rank(seed, t))[:count]
    return sorted(min(by_type[t], key=lambda n: rank(seed, n)) for t in families)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=3)
    a = ap.parse_args()
    if a.count < 1:
        ap.error("--count must be at least 1")
    print("^(" + "|".join(sample(a.models_dir, a.seed, a.count)) + ")$")
    return 0


if __name__ == "__main__":
    sys.exit(main())
