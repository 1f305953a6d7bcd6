#!/usr/bin/env python3
"""Writes the ring-buffer partial-write sweep cases (cases/ring_sweep_*.json): one sequence per layer
whose writes into the full layer cover every (write offset, write length) pair once.

A layer that holds C rows and has seen n >= C tokens would, as a ring buffer, write its next token at
row n mod C (the write offset). A write of L tokens moves the offset from o to (o + L) mod C. With
L from 1 to C + 1 (up to one past the capacity: a write longer than the buffer), every offset has C + 1
writes out and C + 1 in, so one walk (Hierholzer's Eulerian circuit over the C offsets) makes every
pair once after a prefill of exactly C tokens (offset 0). Golden replay judges each case against
transformers' own layers, the kernel and plugin suites against the float64 oracle.

    python3 scripts/ring_sweep_cases.py           # (re)write the cases
    python3 scripts/ring_sweep_cases.py --check   # exit 1 naming any case file that differs
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name, cache, layer types, window, max_cache_len, rows held once full (C), batch, left padding, dtype
SWEEPS = [  # a sweep over C rows feeds C + C * (C + 1) * (C + 2) / 2 tokens: C <= 3 keeps to the 40 of cases/
    ("ring_sweep_static_sliding_c3", "static", ["sliding_attention"], 3, 16, 3, 1, None, "float32"),
    ("ring_sweep_static_below_window_c2", "static", ["sliding_attention", "chunked_attention"], 5, 2, 2, 2, [1, 0],
     "bfloat16"),
    # A dynamic sliding layer keeps W - 1 rows between updates: its "ring" is those rows.
    ("ring_sweep_dynamic_sliding_c3", "dynamic", ["sliding_attention", "full_attention"], 4, None, 3, 1, None, "float64"),
]


def walk(capacity):
    """Write lengths from offset 0 covering every (offset, length) pair, length 1..capacity+1, once."""
    out = {o: list(range(capacity + 1, 0, -1)) for o in range(capacity)}  # lengths left to take from o
    stack, circuit = [(0, None)], []
    while stack:
        o, length = stack[-1]
        if out[o]:
            n = out[o].pop()
            stack.append(((o + n) % capacity, n))
        else:
            stack.pop()
            if length is not None:
                circuit.append(length)
    return circuit[::-1]


def case(name, cache, types, window, max_cache_len, capacity, batch, padding, dtype):
    lengths = walk(capacity)
    seen, pairs = capacity, set()
    for n in lengths:
        pairs.add((seen % capacity, n))
        seen += n
    assert len(pairs) == capacity * (capacity + 1) == len(lengths), (name, len(pairs), len(lengths))
    doc = {
        "name": name,
        "description": (f"The ring-buffer partial-write sweep: a prefill of {capacity} tokens fills the layer's {capacity} "
                        f"rows, then {len(lengths)} writes cover every (write offset, write length) pair once, offsets "
                        f"0..{capacity - 1} (tokens seen mod {capacity}) and lengths 1..{capacity + 1} (scripts/ring_sweep_cases.py)."),
        "tags": ["ring-sweep", "generated"],
        "cache": cache,
        "layer_types": types,
        "window": window,
    }
    if max_cache_len is not None:
        doc["max_cache_len"] = max_cache_len
    doc.update({"batch": batch, "heads": 2, "kv_heads": 1, "head_dim": 4, "dtype": dtype, "left_padding": padding,
                "steps": [{"tokens": capacity}] + [{"tokens": n} for n in lengths],
                "inputs": {"generator": "kvc-mix64-v1", "seed": 53 * 1000 + capacity}})
    return doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing them")
    args = ap.parse_args(argv)
    bad = 0
    for sweep in SWEEPS:
        path = os.path.join(ROOT, "cases", sweep[0] + ".json")
        text = json.dumps(case(*sweep), indent=2) + "\n"
        if args.check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print(f"{os.path.relpath(path, ROOT)}: differs from scripts/ring_sweep_cases.py's (run it to rewrite)")
                bad += 1
        else:
            with open(path, "w") as f:
                f.write(text)
    if not args.check:
        print(f"wrote {len(SWEEPS)} ring-sweep cases to cases/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
